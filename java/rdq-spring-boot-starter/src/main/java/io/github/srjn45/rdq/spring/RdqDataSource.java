package io.github.srjn45.rdq.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;
import org.springframework.beans.factory.annotation.Qualifier;

/**
 * Qualifies a {@link javax.sql.DataSource} bean as the one the rdq worker and
 * the migration use instead of the application's. The worker holds one
 * connection per queue and one each for heartbeats, finishes, maintenance,
 * notifications and the registry for as long as it runs; a pool of its own
 * keeps those from the application's queries. The {@link io.github.srjn45.rdq.RdqClient}
 * keeps using the application's data source, so that a submission joins the
 * application's transactions.
 */
@Target({ElementType.FIELD, ElementType.METHOD, ElementType.PARAMETER, ElementType.TYPE, ElementType.ANNOTATION_TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
@Qualifier
public @interface RdqDataSource {}
