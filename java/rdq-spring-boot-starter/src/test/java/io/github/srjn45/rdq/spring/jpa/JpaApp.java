package io.github.srjn45.rdq.spring.jpa;

import org.springframework.boot.autoconfigure.SpringBootApplication;

/**
 * An application on Spring Data JPA: its transactions are JpaTransactionManager's,
 * and {@link Billing} saves an {@link Invoice} and submits its task in one of them.
 */
@SpringBootApplication
public class JpaApp {}
