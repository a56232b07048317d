package io.github.srjn45.rdq.spring;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.srjn45.rdq.Breaker;
import io.github.srjn45.rdq.Handler;
import io.github.srjn45.rdq.Migrations;
import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.Policy;
import io.github.srjn45.rdq.QueueConfig;
import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.SchemaVersionException;
import io.github.srjn45.rdq.TaskContext;
import io.github.srjn45.rdq.Worker;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.opentelemetry.api.OpenTelemetry;
import io.opentelemetry.api.trace.Span;
import io.opentelemetry.context.Scope;
import io.opentelemetry.sdk.OpenTelemetrySdk;
import io.opentelemetry.sdk.testing.exporter.InMemorySpanExporter;
import io.opentelemetry.sdk.trace.SdkTracerProvider;
import io.opentelemetry.sdk.trace.data.SpanData;
import io.opentelemetry.sdk.trace.export.SimpleSpanProcessor;
import java.net.ConnectException;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.autoconfigure.health.HealthContributorAutoConfiguration;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.context.annotation.Primary;
import org.springframework.jdbc.datasource.DelegatingDataSource;

/** The auto-configuration's conditions, defaults and errors, each on a fresh schema of the real database. */
class AutoConfigurationTest {
    private final List<String> schemas = new ArrayList<>();

    private ApplicationContextRunner runner(boolean migrate) {
        String schema = TestDatabase.newSchemaName();
        schemas.add(schema);
        return new ApplicationContextRunner()
                .withConfiguration(AutoConfigurations.of(DataSourceAutoConfiguration.class, RdqAutoConfiguration.class,
                        HealthContributorAutoConfiguration.class, RdqHealthAutoConfiguration.class))
                .withPropertyValues("spring.datasource.url=" + TestDatabase.jdbcUrl(),
                        "spring.datasource.username=" + TestDatabase.user(),
                        "spring.datasource.password=" + TestDatabase.password(),
                        "rdq.schema=" + schema, "rdq.migrate=" + migrate);
    }

    @AfterEach
    void drop() throws Exception {
        for (String s : schemas) {
            TestDatabase.drop(s);
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class OneHandler {
        @Bean
        @RdqHandler(name = "h", queues = "q")
        Handler h() {
            return ctx -> {};
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class NotAHandler {
        @Bean
        @RdqHandler("h")
        Runnable h() {
            return () -> {};
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class TwoHandlersOneName {
        @Bean
        @RdqHandler("same")
        Handler first() {
            return ctx -> {};
        }

        @Bean
        @RdqHandler("same")
        Handler second() {
            return ctx -> {};
        }
    }

    /** A bean whose method is a handler. */
    static class MethodHandler {
        @RdqHandler(name = "m", queues = "q")
        void run(TaskContext ctx) {}
    }

    @Configuration(proxyBeanMethods = false)
    static class MethodHandlerOnly {
        @Bean
        MethodHandler methodHandler() {
            return new MethodHandler();
        }
    }

    /** A handler method with the wrong parameters. */
    static class WrongSignature {
        @RdqHandler("w")
        void run(String payload) {}
    }

    @Configuration(proxyBeanMethods = false)
    static class WrongSignatureConfig {
        @Bean
        WrongSignature wrong() {
            return new WrongSignature();
        }
    }

    /** A method taking the name of a handler bean. */
    static class SameNameAsBean {
        @RdqHandler("h")
        void run(TaskContext ctx) {}
    }

    @Configuration(proxyBeanMethods = false)
    static class SameNameAsBeanConfig {
        @Bean
        SameNameAsBean same() {
            return new SameNameAsBean();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class CustomizerOnly {
        @Bean
        RdqWorkerCustomizer inCode() {
            return b -> b.queue("coded").handle("c", ctx -> {});
        }
    }

    /** A handler whose dependency is down, and the application's observability beans. */
    @Configuration(proxyBeanMethods = false)
    static class Observed {
        static final ConcurrentLinkedQueue<String> traces = new ConcurrentLinkedQueue<>();

        @Bean
        @RdqHandler(name = "traced", queues = "q")
        Handler traced() {
            return ctx -> traces.add(Span.current().getSpanContext().getTraceId());
        }

        @Bean
        @RdqHandler(name = "down", queues = "q")
        Handler down() {
            return ctx -> {
                throw new ConnectException("connection refused");
            };
        }

        @Bean
        InMemorySpanExporter spans() {
            return InMemorySpanExporter.create();
        }

        @Bean
        OpenTelemetry openTelemetry(InMemorySpanExporter spans) {
            return OpenTelemetrySdk.builder()
                    .setTracerProvider(SdkTracerProvider.builder().addSpanProcessor(SimpleSpanProcessor.create(spans)).build())
                    .build();
        }

        @Bean
        MeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class OwnClient {
        static RdqClient client;

        @Bean
        RdqClient myClient(DataSource ds) {
            client = RdqClient.builder(ds).schema("rdq_own_client_unused").build();
            return client;
        }
    }

    /** A data source counting the connections taken from it. */
    static final class CountingDataSource extends DelegatingDataSource {
        final AtomicInteger taken = new AtomicInteger();

        CountingDataSource() {
            super(TestDatabase.dataSource());
        }

        @Override
        public Connection getConnection() throws SQLException {
            taken.incrementAndGet();
            return super.getConnection();
        }
    }

    @Configuration(proxyBeanMethods = false)
    static class TwoDataSources {
        @Bean
        @Primary
        CountingDataSource appDataSource() {
            return new CountingDataSource();
        }

        @Bean
        @RdqDataSource
        CountingDataSource rdqDataSource() {
            return new CountingDataSource();
        }
    }

    @Test
    void theWorkerRunsOnTheRdqDataSourceAndTheClientOnTheApplicationOne() {
        runner(true).withUserConfiguration(TwoDataSources.class, OneHandler.class).run(ctx -> {
            assertThat(ctx).hasNotFailed();
            CountingDataSource app = ctx.getBean("appDataSource", CountingDataSource.class);
            CountingDataSource rdq = ctx.getBean("rdqDataSource", CountingDataSource.class);
            assertEquals(Migrations.latestVersion(), ctx.getBean(RdqSchemaMigration.class).version());
            // The migration and the worker's version check took one each; its loops take more once running.
            TestDatabase.await("the worker's loops took connections from the rdq data source", () -> rdq.taken.get() > 2);
            int before = app.taken.get();
            ctx.getBean(RdqClient.class).submit(NewTask.builder("q", "h").build());
            assertEquals(before + 1, app.taken.get(), "the client submits on the application's data source");
        });
    }

    @Test
    void migrationIsOffByDefaultAndAnUnmigratedSchemaFailsTheStartSayingSo() {
        runner(false).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(SchemaVersionException.class)
                    .hasMessageContaining("has no rdq tables").hasMessageContaining("Migrations.migrate");
        });
    }

    @Test
    void withoutHandlerBeansThereIsAClientAndNoWorker() {
        runner(true).run(ctx -> {
            assertThat(ctx).hasSingleBean(RdqClient.class).hasSingleBean(RdqSchemaMigration.class)
                    .doesNotHaveBean(Worker.class).doesNotHaveBean(RdqWorkerLifecycle.class);
            assertEquals(Migrations.latestVersion(), ctx.getBean(RdqSchemaMigration.class).version());
            Health h = ctx.getBean(RdqHealthIndicator.class).health();
            assertEquals(org.springframework.boot.actuate.health.Status.UP, h.getStatus(), h.toString());
            assertThat(h.getDetails()).doesNotContainKey("worker");
        });
    }

    @Test
    void aHandlerBeanGetsAWorkerBoundToTheContext() {
        runner(true).withUserConfiguration(OneHandler.class).run(ctx -> {
            assertThat(ctx).hasSingleBean(Worker.class).hasSingleBean(RdqWorkerLifecycle.class);
            assertThat(ctx.getBean(RdqWorkerLifecycle.class).shutdownTimeout()).isEqualTo(Duration.ofSeconds(30));
        });
    }

    @Test
    void aHandlerMethodAloneGetsAWorkerThatRunsIt() {
        runner(true).withUserConfiguration(MethodHandlerOnly.class).run(ctx -> {
            assertThat(ctx).hasSingleBean(Worker.class);
            assertTrue(ctx.getBean(RdqWorkerLifecycle.class).isRunning());
            RdqClient client = ctx.getBean(RdqClient.class);
            UUID id = client.submit(NewTask.builder("q", "m").build()).task().id();
            TestDatabase.await("the handler method ran the task",
                    () -> client.get(id).orElseThrow().status() == io.github.srjn45.rdq.Status.SUCCEEDED);
        });
    }

    @Test
    void aCustomizerAloneGetsAWorkerRunningWhatItRegistered() {
        runner(true).withUserConfiguration(CustomizerOnly.class).run(ctx -> {
            assertThat(ctx).hasSingleBean(Worker.class);
            RdqClient client = ctx.getBean(RdqClient.class);
            UUID id = client.submit(NewTask.builder("coded", "c").build()).task().id();
            TestDatabase.await("the handler registered in code ran the task",
                    () -> client.get(id).orElseThrow().status() == io.github.srjn45.rdq.Status.SUCCEEDED);
        });
    }

    @Test
    void aHandlerMethodWithOtherParametersFailsTheStartNamingIt() {
        runner(true).withUserConfiguration(WrongSignatureConfig.class).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("WrongSignature.run of bean 'wrong'")
                    .hasMessageContaining("void run(TaskContext ctx)");
        });
    }

    @Test
    void aHandlerMethodTakingABeansNameFailsTheStartNamingBoth() {
        runner(true).withUserConfiguration(OneHandler.class, SameNameAsBeanConfig.class).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("bean 'h' and method").hasMessageContaining("SameNameAsBean.run");
        });
    }

    @Test
    void withoutAutoStartupTheApplicationStartsTheWorker() {
        runner(true).withUserConfiguration(OneHandler.class).withPropertyValues("rdq.worker.auto-startup=false").run(ctx -> {
            RdqWorkerLifecycle lifecycle = ctx.getBean(RdqWorkerLifecycle.class);
            assertFalse(lifecycle.isRunning());
            Health down = ctx.getBean(RdqHealthIndicator.class).health();
            assertEquals(org.springframework.boot.actuate.health.Status.DOWN, down.getStatus(), down.toString());
            RdqClient client = ctx.getBean(RdqClient.class);
            UUID id = client.submit(NewTask.builder("q", "h").build()).task().id();
            lifecycle.start();
            assertTrue(lifecycle.isRunning());
            TestDatabase.await("the task ran once the worker started",
                    () -> client.get(id).orElseThrow().status() == io.github.srjn45.rdq.Status.SUCCEEDED);
            Health up = ctx.getBean(RdqHealthIndicator.class).health();
            assertEquals(org.springframework.boot.actuate.health.Status.UP, up.getStatus(), up.toString());
        });
    }

    @Test
    void theWorkerCanBeTurnedOff() {
        runner(true).withUserConfiguration(OneHandler.class).withPropertyValues("rdq.worker.enabled=false")
                .run(ctx -> assertThat(ctx).hasSingleBean(RdqClient.class).doesNotHaveBean(Worker.class));
    }

    @Test
    void anApplicationClientReplacesTheAutoConfiguredOne() {
        runner(true).withUserConfiguration(OwnClient.class).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(SchemaVersionException.class)
                    .hasMessageContaining("rdq_own_client_unused");
        });
    }

    @Test
    void aHandlerBeanThatIsNoHandlerFailsTheStartNamingIt() {
        runner(true).withUserConfiguration(NotAHandler.class).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("bean 'h'").hasMessageContaining("does not implement io.github.srjn45.rdq.Handler");
        });
    }

    @Test
    void twoHandlerBeansWithOneNameFailTheStartNamingBoth() {
        runner(true).withUserConfiguration(TwoHandlersOneName.class).run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("bean 'first' and bean 'second'");
        });
    }

    @Test
    void aZeroIsRefusedNamingThePropertyRatherThanReadAsTheDefault() {
        runner(true).withUserConfiguration(OneHandler.class).withPropertyValues("rdq.queues.q.concurrency=0").run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(InvalidConfigurationPropertyValueException.class)
                    .hasMessageContaining("rdq.queues.q.concurrency");
        });
    }

    @Test
    void theApplicationsOpenTelemetryAndMeterRegistryReachTheClientAndTheWorker() {
        runner(true).withUserConfiguration(Observed.class).run(ctx -> {
            assertThat(ctx).hasNotFailed();
            OpenTelemetry otel = ctx.getBean(OpenTelemetry.class);
            InMemorySpanExporter spans = ctx.getBean(InMemorySpanExporter.class);
            RdqClient client = ctx.getBean(RdqClient.class);
            Span parent = otel.getTracer("test").spanBuilder("request").startSpan();
            String trace = parent.getSpanContext().getTraceId();
            try (Scope ignored = parent.makeCurrent()) {
                client.submit(NewTask.builder("q", "traced").build());
            } finally {
                parent.end();
            }
            TestDatabase.await("the handler ran in the submitter's trace", () -> Observed.traces.contains(trace));
            List<String> names = spans.getFinishedSpanItems().stream()
                    .filter(d -> d.getTraceId().equals(trace)).map(SpanData::getName).toList();
            assertThat(names).contains("rdq.submit");
            TestDatabase.await("the worker's span ended", () -> spans.getFinishedSpanItems().stream()
                    .anyMatch(d -> d.getTraceId().equals(trace) && d.getName().equals("rdq.execute traced")));
            MeterRegistry registry = ctx.getBean(MeterRegistry.class);
            TestDatabase.await("the worker's metrics are in the application's registry",
                    () -> registry.find("rdq.worker.handler.duration").tags("handler", "traced").timer() != null);
        });
    }

    @Test
    void withoutMicrometerOrOpenTelemetryTheClientAndWorkerRunAsBefore() {
        runner(true).withClassLoader(new FilteredClassLoader("io.micrometer", "io.opentelemetry"))
                .withUserConfiguration(MethodHandlerOnly.class).run(ctx -> {
                    assertThat(ctx).hasNotFailed().doesNotHaveBean(RdqInstrumentation.class);
                    RdqClient client = ctx.getBean(RdqClient.class);
                    UUID id = client.submit(NewTask.builder("q", "m").build()).task().id();
                    TestDatabase.await("the task ran",
                            () -> client.get(id).orElseThrow().status() == io.github.srjn45.rdq.Status.SUCCEEDED);
                });
    }

    @Test
    void breakerPropertiesPauseAHandlerWhoseDependencyIsDown() {
        runner(true).withUserConfiguration(Observed.class)
                .withPropertyValues("rdq.queues.q.breaker.enabled=true", "rdq.queues.q.breaker.min-failed-tasks=2",
                        "rdq.queues.q.breaker.cool-off=1h", "rdq.queues.q.breaker.max-cool-off=2h",
                        "rdq.queues.q.policy.initial-backoff=1h")
                .run(ctx -> {
                    assertThat(ctx).hasNotFailed();
                    RdqClient client = ctx.getBean(RdqClient.class);
                    for (int i = 0; i < 3; i++) {
                        client.submit(NewTask.builder("q", "down").build());
                    }
                    String schema = schemas.get(schemas.size() - 1);
                    DataSource ds = ctx.getBean(DataSource.class);
                    TestDatabase.await("the breaker paused the handler", () -> {
                        try (Connection c = ds.getConnection(); ResultSet rs = c.createStatement().executeQuery(
                                "SELECT count(*) FROM " + schema + ".paused_handlers WHERE queue = 'q' AND handler = 'down' AND actor = 'breaker'")) {
                            rs.next();
                            return rs.getLong(1) == 1;
                        } catch (SQLException e) {
                            throw new IllegalStateException(e);
                        }
                    });
                });
    }

    @Test
    void breakerPropertiesBuildTheSdksBreakerAndAreRefusedWhileItIsOff() {
        RdqProperties.Queue q = new RdqProperties.Queue();
        assertTrue(QueueConfigs.of("q", q).breaker().isEmpty(), "no breaker unless enabled");
        q.getBreaker().setEnabled(true);
        q.getBreaker().setMinFailedTasks(3);
        q.getBreaker().setCoolOff(Duration.ofSeconds(5));
        QueueConfig c = QueueConfigs.of("q", q);
        Breaker b = c.breaker().orElseThrow();
        assertEquals(3, b.minFailedTasks());
        assertEquals(Duration.ofSeconds(5), b.coolOff());
        assertEquals(Breaker.DEFAULT_WINDOW, b.window(), "unset settings are the SDK's defaults");

        runner(true).withUserConfiguration(OneHandler.class).withPropertyValues("rdq.queues.q.breaker.cool-off=5s").run(ctx -> {
            assertThat(ctx).hasFailed();
            assertThat(ctx.getStartupFailure()).rootCause().isInstanceOf(InvalidConfigurationPropertyValueException.class)
                    .hasMessageContaining("rdq.queues.q.breaker.enabled=true");
        });
        runner(true).withUserConfiguration(OneHandler.class)
                .withPropertyValues("rdq.queues.q.breaker.enabled=true", "rdq.queues.q.breaker.failure-ratio=1.5").run(ctx -> {
                    assertThat(ctx).hasFailed();
                    assertThat(ctx.getStartupFailure()).rootCause()
                            .isInstanceOf(InvalidConfigurationPropertyValueException.class)
                            .hasMessageContaining("rdq.queues.q.breaker.failure-ratio");
                });
    }

    @Test
    void contradictoryPropertiesAreRefused() {
        runner(true).withUserConfiguration(OneHandler.class)
                .withPropertyValues("rdq.queues.q.timeout=5s", "rdq.queues.q.no-timeout=true").run(ctx -> {
                    assertThat(ctx).hasFailed();
                    assertThat(ctx.getStartupFailure()).rootCause()
                            .isInstanceOf(InvalidConfigurationPropertyValueException.class)
                            .hasMessageContaining("rdq.queues.q.timeout");
                });
    }

    @Test
    void withoutActuatorThereIsNoHealthIndicator() {
        runner(true).withClassLoader(new FilteredClassLoader(HealthIndicator.class))
                .run(ctx -> assertThat(ctx).hasSingleBean(RdqClient.class).doesNotHaveBean(RdqHealthIndicator.class));
    }

    @Test
    void theHealthIndicatorCanBeTurnedOff() {
        runner(true).withPropertyValues("management.health.rdq.enabled=false")
                .run(ctx -> assertThat(ctx).hasSingleBean(RdqClient.class).doesNotHaveBean(RdqHealthIndicator.class));
    }

    @Test
    void jitterZeroMeansNoJitter() {
        RdqProperties.Policy p = new RdqProperties.Policy();
        p.setJitter(0.0);
        p.setInitialBackoff(Duration.ofSeconds(4));
        Policy policy = QueueConfigs.policy("rdq.queues.q.policy.", p);
        assertEquals(Duration.ofSeconds(4), policy.jitteredDelay(1, 0.999), "no delay shortened");
        p.setJitter(null);
        assertThat(QueueConfigs.policy("rdq.queues.q.policy.", p).jitteredDelay(1, 0.999))
                .as("unset: the SDK's default jitter shortens it").isLessThan(Duration.ofSeconds(4));
    }
}
