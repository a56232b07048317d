package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.RdqClient;
import javax.sql.DataSource;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.autoconfigure.health.ConditionalOnEnabledHealthIndicator;
import org.springframework.boot.actuate.health.HealthIndicator;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.context.annotation.Bean;

/**
 * The {@code rdq} health indicator, when Spring Boot Actuator is present;
 * {@code management.health.rdq.enabled=false} turns it off.
 */
@AutoConfiguration(after = RdqAutoConfiguration.class)
@ConditionalOnClass({HealthIndicator.class, ConditionalOnEnabledHealthIndicator.class})
@ConditionalOnBean(RdqClient.class)
@ConditionalOnEnabledHealthIndicator("rdq")
public class RdqHealthAutoConfiguration {
    /** The indicator, reporting as "rdq". */
    @Bean
    @ConditionalOnMissingBean(name = "rdqHealthIndicator")
    public RdqHealthIndicator rdqHealthIndicator(DataSource dataSource,
            @RdqDataSource ObjectProvider<DataSource> rdqDataSource, RdqProperties properties,
            ObjectProvider<RdqWorkerLifecycle> worker) {
        return new RdqHealthIndicator(rdqDataSource.getIfAvailable(() -> dataSource), properties.getSchema(),
                worker.getIfAvailable());
    }
}
