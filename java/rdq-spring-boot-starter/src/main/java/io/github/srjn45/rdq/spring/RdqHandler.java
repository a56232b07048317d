package io.github.srjn45.rdq.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.core.annotation.AliasFor;

/**
 * Declares a handler of the application's rdq worker, under a handler name:
 * the worker runs the tasks submitted with that name on it.
 *
 * <p>On a bean's class, or on its {@code @Bean} method, the bean must
 * implement {@link io.github.srjn45.rdq.Handler}:
 *
 * <pre>{@code
 * @Component
 * @RdqHandler(name = "send-welcome", queues = "emails")
 * class SendWelcome implements Handler {
 *     public void handle(TaskContext ctx) throws Exception { ... }
 * }
 * }</pre>
 *
 * <p>On any other method of a bean, the method must take exactly one
 * {@link io.github.srjn45.rdq.TaskContext}; it is called through the bean's
 * proxy, so {@code @Transactional} and other advice apply, and what it throws
 * is the attempt's outcome as for a {@code Handler}:
 *
 * <pre>{@code
 * @Component
 * class Receipts {
 *     @RdqHandler(name = "send-receipt", queues = "emails")
 *     void send(TaskContext ctx) { ... }
 * }
 * }</pre>
 *
 * <p>The name is a stable contract with the tasks already stored: renaming a
 * handler leaves the tasks of its old name waiting. Two handlers with one name
 * fail the application's start.
 */
@Target({ElementType.TYPE, ElementType.METHOD})
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface RdqHandler {
    /** The handler name; an alias of {@link #name()}. */
    @AliasFor("name")
    String value() default "";

    /** The handler name tasks are submitted with. */
    @AliasFor("value")
    String name() default "";

    /**
     * Queues the worker runs for this handler, besides those configured under
     * {@code rdq.queues}; a queue named here and not configured runs with the
     * defaults.
     */
    String[] queues() default {};
}
