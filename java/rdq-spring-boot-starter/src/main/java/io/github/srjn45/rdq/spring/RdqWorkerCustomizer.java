package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.Worker;

/**
 * Customizes the auto-configured worker's builder after the properties and the
 * {@link RdqHandler} beans were applied to it: handlers registered in code,
 * queue configurations the properties cannot express (a policy's classifier or
 * fingerprint), any other builder setting. Every bean of this type is applied,
 * in {@link org.springframework.core.Ordered} order.
 */
@FunctionalInterface
public interface RdqWorkerCustomizer {
    /** Customizes builder. */
    void customize(Worker.Builder builder);
}
