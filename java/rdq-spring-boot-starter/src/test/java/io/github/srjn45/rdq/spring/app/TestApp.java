package io.github.srjn45.rdq.spring.app;

import io.github.srjn45.rdq.Handler;
import io.github.srjn45.rdq.TaskContext;
import io.github.srjn45.rdq.spring.RdqHandler;
import java.util.UUID;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.context.annotation.Bean;
import org.springframework.stereotype.Component;

/**
 * The application the starter's tests run: handlers as beans, a service
 * submitting inside its transactions. Its properties come from each test.
 */
@SpringBootApplication
public class TestApp {
    /** Sends welcome mails: records each task it ran. */
    @Component
    @RdqHandler(name = "send-welcome", queues = "emails")
    public static class SendWelcome implements Handler {
        /** The payloads handled, in order. */
        public final BlockingQueue<String> handled = new LinkedBlockingQueue<>();

        @Override
        public void handle(TaskContext ctx) {
            handled.add(ctx.payloadText());
        }
    }

    /** A handler whose downstream always refuses. */
    @Component
    @RdqHandler(name = "always-fails", queues = "flaky")
    public static class AlwaysFails implements Handler {
        @Override
        public void handle(TaskContext ctx) {
            throw new IllegalStateException("downstream refused task " + ctx.id());
        }
    }

    /** A handler that runs until it is interrupted, recording why. */
    public static class Blocking implements Handler {
        /** Counted down when a task starts. */
        public final CountDownLatch started = new CountDownLatch(1);
        /** The cancel reasons of the executions interrupted. */
        public final BlockingQueue<TaskContext.CancelReason> interrupted = new LinkedBlockingQueue<>();
        /** The task IDs started. */
        public final BlockingQueue<UUID> ids = new LinkedBlockingQueue<>();

        @Override
        public void handle(TaskContext ctx) throws InterruptedException {
            ids.add(ctx.id());
            started.countDown();
            try {
                new CountDownLatch(1).await();
            } catch (InterruptedException e) {
                interrupted.add(ctx.cancelReason().orElseThrow());
                throw e;
            }
        }
    }

    /** The blocking handler, registered from a {@code @Bean} method. */
    @Bean
    @RdqHandler(name = "blocks", queues = "slow")
    Blocking blocking() {
        return new Blocking();
    }
}
