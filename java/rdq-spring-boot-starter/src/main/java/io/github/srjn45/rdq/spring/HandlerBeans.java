package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.Handler;
import io.github.srjn45.rdq.TaskContext;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/**
 * Finds the handlers of a context: beans annotated {@link RdqHandler} (on their
 * class or their {@code @Bean} method) that implement {@link Handler}, and
 * methods annotated {@link RdqHandler} taking one {@link TaskContext}.
 */
final class HandlerBeans {
    private HandlerBeans() {}

    /** A handler: its name, where it was declared, the queues it names. */
    record Found(String name, String declaredBy, String[] queues, Handler handler) {}

    /** Whether the context declares any handler; instantiates no bean. */
    static boolean any(ListableBeanFactory beans) {
        if (beans.getBeanNamesForAnnotation(RdqHandler.class).length > 0) {
            return true;
        }
        for (String bean : beans.getBeanDefinitionNames()) {
            if (!methods(beans, bean).isEmpty()) {
                return true;
            }
        }
        return false;
    }

    /**
     * The handlers of the context, with their beans created.
     *
     * @throws IllegalStateException naming the declaration when one has no
     *         name, is not a handler, or takes a name another one took
     */
    static List<Found> find(ListableBeanFactory beans) {
        List<Found> out = new ArrayList<>();
        Map<String, String> declaredBy = new LinkedHashMap<>();
        for (String bean : beans.getBeanNamesForAnnotation(RdqHandler.class)) {
            RdqHandler a = beans.findAnnotationOnBean(bean, RdqHandler.class);
            if (a == null) {
                continue;
            }
            String where = "bean '" + bean + "'";
            String name = name(a, where);
            Object h = beans.getBean(bean);
            if (!(h instanceof Handler)) {
                throw new IllegalStateException("rdq: " + where + " is annotated @RdqHandler(\"" + name
                        + "\") but its type " + h.getClass().getName() + " does not implement " + Handler.class.getName()
                        + ": implement it (void handle(TaskContext ctx)), or annotate a method taking a TaskContext instead");
            }
            add(out, declaredBy, new Found(name, where, a.queues(), (Handler) h));
        }
        for (String bean : beans.getBeanDefinitionNames()) {
            Map<Method, RdqHandler> methods = methods(beans, bean);
            if (methods.isEmpty()) {
                continue;
            }
            Object target = beans.getBean(bean);
            for (Map.Entry<Method, RdqHandler> e : methods.entrySet()) {
                Method m = e.getKey();
                String where = "method " + m.getDeclaringClass().getName() + "." + m.getName() + " of bean '" + bean + "'";
                String name = name(e.getValue(), where);
                if (m.getParameterCount() != 1 || m.getParameterTypes()[0] != TaskContext.class) {
                    throw new IllegalStateException("rdq: " + where + " is annotated @RdqHandler(\"" + name
                            + "\") but does not take exactly one " + TaskContext.class.getName()
                            + ": declare it as void " + m.getName() + "(TaskContext ctx)");
                }
                Method invocable = AopUtils.selectInvocableMethod(m, target.getClass());
                ReflectionUtils.makeAccessible(invocable);
                add(out, declaredBy, new Found(name, where, e.getValue().queues(), ctx -> invoke(invocable, target, ctx)));
            }
        }
        return out;
    }

    /** The methods of the bean's class annotated @RdqHandler, other than @Bean methods. */
    private static Map<Method, RdqHandler> methods(ListableBeanFactory beans, String bean) {
        Class<?> type = beans.getType(bean, false);
        if (type == null) {
            return Map.of();
        }
        return MethodIntrospector.selectMethods(ClassUtils.getUserClass(type),
                (MethodIntrospector.MetadataLookup<RdqHandler>) m -> AnnotatedElementUtils.hasAnnotation(m, Bean.class)
                        ? null : AnnotatedElementUtils.findMergedAnnotation(m, RdqHandler.class));
    }

    private static String name(RdqHandler a, String where) {
        if (a.name().isBlank()) {
            throw new IllegalStateException("rdq: " + where + " is annotated @RdqHandler without a name: "
                    + "give the handler name its tasks are submitted with, @RdqHandler(name = \"...\")");
        }
        return a.name();
    }

    private static void add(List<Found> out, Map<String, String> declaredBy, Found f) {
        String other = declaredBy.putIfAbsent(f.name(), f.declaredBy());
        if (other != null) {
            throw new IllegalStateException("rdq: " + other + " and " + f.declaredBy() + " are both annotated "
                    + "@RdqHandler(\"" + f.name() + "\"): a handler name is run by one handler; rename one of them");
        }
        out.add(f);
    }

    private static void invoke(Method m, Object target, TaskContext ctx) throws Exception {
        try {
            m.invoke(target, ctx);
        } catch (InvocationTargetException e) {
            Throwable t = e.getTargetException();
            if (t instanceof Exception ex) {
                throw ex;
            }
            if (t instanceof Error err) {
                throw err;
            }
            throw e;
        }
    }
}
