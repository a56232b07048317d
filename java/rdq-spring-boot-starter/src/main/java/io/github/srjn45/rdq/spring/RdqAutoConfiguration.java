package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Worker;
import java.time.Duration;
import javax.sql.DataSource;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionMessage;
import org.springframework.boot.autoconfigure.condition.ConditionOutcome;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.condition.ConditionalOnSingleCandidate;
import org.springframework.boot.autoconfigure.condition.SpringBootCondition;
import org.springframework.boot.autoconfigure.jdbc.DataSourceAutoConfiguration;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Conditional;
import org.springframework.context.annotation.ConditionContext;
import org.springframework.context.annotation.Configuration;
import org.springframework.core.type.AnnotatedTypeMetadata;
import org.springframework.jdbc.datasource.DataSourceUtils;

/**
 * Auto-configuration of rdq on the application's {@link DataSource}:
 *
 * <ul>
 *   <li>with {@code rdq.migrate=true}, a {@link RdqSchemaMigration} that creates
 *       or upgrades the schema before anything else of rdq is created;</li>
 *   <li>an {@link RdqClient} whose calls join the current Spring-managed
 *       transaction on that data source (a task submitted in a transaction
 *       that rolls back is not stored), given the policy of every configured
 *       queue so that it checks task budgets against them;</li>
 *   <li>when a bean or a method is annotated {@link RdqHandler} or an {@link RdqWorkerCustomizer}
 *       exists and {@code rdq.worker.enabled} is not false, a {@link Worker}
 *       running the configured queues with those handlers, on the
 *       {@link RdqDataSource} data source if there is one, and an
 *       {@link RdqWorkerLifecycle} starting and stopping it with the context;</li>
 *   <li>the application's Micrometer {@code MeterRegistry} as the worker's
 *       metrics, and its {@code OpenTelemetry} for the worker's and the client's
 *       spans and the trace context in task headers, each when the library is on
 *       the class path and the application has exactly one such bean.</li>
 * </ul>
 *
 * Each bean backs off when the application defines one of its type.
 */
@AutoConfiguration(after = DataSourceAutoConfiguration.class)
@ConditionalOnClass({RdqClient.class, DataSourceUtils.class})
@ConditionalOnSingleCandidate(DataSource.class)
@EnableConfigurationProperties(RdqProperties.class)
public class RdqAutoConfiguration {
    /** Migrates the schema on start when {@code rdq.migrate=true}. */
    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnProperty(prefix = "rdq", name = "migrate", havingValue = "true")
    public RdqSchemaMigration rdqSchemaMigration(DataSource dataSource,
            @RdqDataSource ObjectProvider<DataSource> rdqDataSource, RdqProperties properties) {
        return new RdqSchemaMigration(rdqDataSource.getIfAvailable(() -> dataSource), properties.getSchema());
    }

    /** The client, joining Spring-managed transactions on the application's data source. */
    @Bean
    @ConditionalOnMissingBean
    public RdqClient rdqClient(DataSource dataSource, ObjectProvider<RdqSchemaMigration> migration,
            RdqProperties properties, ObjectProvider<RdqInstrumentation> instrumentation) {
        migrateFirst(migration);
        RdqClient.Builder b = RdqClient.builder(new TransactionJoiningDataSource(dataSource))
                .schema(properties.getSchema());
        if (properties.getKeyRetention() != null) {
            b.keyRetention(positive("rdq.key-retention", properties.getKeyRetention()));
        }
        properties.getQueues().forEach((name, q) ->
                b.policy(name, QueueConfigs.policy("rdq.queues." + name + ".policy.", q.getPolicy())));
        instrumentation.orderedStream().forEach(i -> i.client(b));
        return b.build();
    }

    /** The worker, with the configured queues and the handler beans. */
    @Bean
    @ConditionalOnMissingBean
    @ConditionalOnProperty(prefix = "rdq.worker", name = "enabled", matchIfMissing = true)
    @Conditional(OnHandlersCondition.class)
    public Worker rdqWorker(DataSource dataSource, @RdqDataSource ObjectProvider<DataSource> rdqDataSource,
            ObjectProvider<RdqSchemaMigration> migration, RdqProperties properties, ListableBeanFactory beans,
            ObjectProvider<RdqWorkerCustomizer> customizers, ObjectProvider<RdqInstrumentation> instrumentation) {
        migrateFirst(migration);
        RdqProperties.Worker w = properties.getWorker();
        Worker.Builder b = Worker.builder(rdqDataSource.getIfAvailable(() -> dataSource)).schema(properties.getSchema());
        if (w.getId() != null) {
            b.id(w.getId());
        }
        if (w.getPollInterval() != null) {
            b.pollInterval(positive("rdq.worker.poll-interval", w.getPollInterval()));
        }
        if (w.getReclaimInterval() != null) {
            b.reclaimInterval(positive("rdq.worker.reclaim-interval", w.getReclaimInterval()));
        }
        if (w.getPurgeInterval() != null) {
            b.purgeInterval(positive("rdq.worker.purge-interval", w.getPurgeInterval()));
        }
        if (w.getSucceededTtl() != null) {
            b.succeededTtl(positive("rdq.worker.succeeded-ttl", w.getSucceededTtl()));
        }
        if (properties.getKeyRetention() != null) {
            b.keyRetention(positive("rdq.key-retention", properties.getKeyRetention()));
        }
        properties.getQueues().forEach((name, q) -> b.queue(name, QueueConfigs.of(name, q)));
        for (HandlerBeans.Found h : HandlerBeans.find(beans)) {
            for (String queue : h.queues()) {
                if (!properties.getQueues().containsKey(queue)) {
                    b.queue(queue);
                }
            }
            b.handle(h.name(), h.handler());
        }
        instrumentation.orderedStream().forEach(i -> i.worker(b));
        customizers.orderedStream().forEach(c -> c.customize(b));
        return b.build();
    }

    /** Starts the worker with the context and stops it gracefully at shutdown. */
    @Bean
    @ConditionalOnBean(Worker.class)
    @ConditionalOnMissingBean
    public RdqWorkerLifecycle rdqWorkerLifecycle(Worker worker, RdqProperties properties) {
        RdqProperties.Worker w = properties.getWorker();
        if (w.getShutdownTimeout() == null || w.getShutdownTimeout().isNegative()) {
            throw new InvalidConfigurationPropertyValueException("rdq.worker.shutdown-timeout", w.getShutdownTimeout(),
                    "give the grace period running handlers get at shutdown, zero or more");
        }
        return new RdqWorkerLifecycle(worker, w.getShutdownTimeout(), w.isAutoStartup());
    }

    /** Creates the migration bean, when there is one, so that the schema is migrated before it is used. */
    /** The worker's metrics in the application's Micrometer registry. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
    static class Meters {
        @Bean
        RdqInstrumentation rdqMeters(ObjectProvider<io.micrometer.core.instrument.MeterRegistry> registry) {
            return b -> registry.ifUnique(b::meterRegistry);
        }
    }

    /** The worker's and the client's spans on the application's OpenTelemetry. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.opentelemetry.api.OpenTelemetry")
    static class Tracing {
        @Bean
        RdqInstrumentation rdqTracing(ObjectProvider<io.opentelemetry.api.OpenTelemetry> openTelemetry) {
            return new RdqInstrumentation() {
                @Override
                public void worker(Worker.Builder builder) {
                    openTelemetry.ifUnique(builder::openTelemetry);
                }

                @Override
                public void client(RdqClient.Builder builder) {
                    openTelemetry.ifUnique(builder::openTelemetry);
                }
            };
        }
    }

    private static void migrateFirst(ObjectProvider<RdqSchemaMigration> migration) {
        migration.getIfAvailable();
    }

    private static Duration positive(String name, Duration d) {
        if (d.isNegative() || d.isZero()) {
            throw new InvalidConfigurationPropertyValueException(name, d,
                    "give a positive duration, or leave the property unset for the default");
        }
        return d;
    }

    /** A handler (a bean or a method annotated {@link RdqHandler}) or a worker customizer exists. */
    static final class OnHandlersCondition extends SpringBootCondition {
        @Override
        public ConditionOutcome getMatchOutcome(ConditionContext context, AnnotatedTypeMetadata metadata) {
            ConditionMessage.Builder m = ConditionMessage.forCondition("rdq handlers");
            ConfigurableListableBeanFactory beans = context.getBeanFactory();
            if (beans == null) {
                return ConditionOutcome.noMatch(m.because("there is no bean factory"));
            }
            if (HandlerBeans.any(beans)) {
                return ConditionOutcome.match(m.found("handler").items("annotated @RdqHandler"));
            }
            if (beans.getBeanNamesForType(RdqWorkerCustomizer.class, true, false).length > 0) {
                return ConditionOutcome.match(m.found("bean").items(RdqWorkerCustomizer.class.getSimpleName()));
            }
            return ConditionOutcome.noMatch(m.didNotFind("handler or worker customizer").atAll());
        }
    }
}
