package io.github.srjn45.rdq.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.core.annotation.AliasFor;

/**
 * Registers a bean implementing {@link io.github.srjn45.rdq.Handler} with the
 * application's rdq worker, under a handler name: the worker runs tasks
 * submitted with that name. The bean is an ordinary Spring bean (a
 * {@code @Component}, or a {@code @Bean} method annotated here), so it gets
 * its dependencies injected and may be proxied, {@code @Transactional} included.
 *
 * <pre>{@code
 * @Component
 * @RdqHandler(name = "send-welcome", queues = "emails")
 * class SendWelcome implements Handler {
 *     public void handle(TaskContext ctx) throws Exception { ... }
 * }
 * }</pre>
 *
 * <p>The name is a stable contract with the tasks already stored: renaming a
 * handler leaves the tasks of its old name waiting. Two beans with one name
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
