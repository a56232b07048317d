package io.github.srjn45.rdq.spring;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.srjn45.rdq.RdqClient;
import io.github.srjn45.rdq.Status;
import io.github.srjn45.rdq.spring.jpa.Billing;
import io.github.srjn45.rdq.spring.jpa.Invoices;
import io.github.srjn45.rdq.spring.jpa.JpaApp;
import java.util.UUID;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.DisposableBean;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.TestConfiguration;
import org.springframework.orm.jpa.JpaTransactionManager;
import org.springframework.test.annotation.DirtiesContext;
import org.springframework.test.context.DynamicPropertyRegistry;
import org.springframework.test.context.DynamicPropertySource;
import org.springframework.transaction.PlatformTransactionManager;

/**
 * A submission inside a Spring Data JPA application's {@code @Transactional}
 * method, under JpaTransactionManager: the task commits and rolls back with
 * the entity saved beside it.
 */
@SpringBootTest(classes = {JpaApp.class, JpaTransactionTest.DropSchema.class})
@DirtiesContext
class JpaTransactionTest {
    static final String SCHEMA = TestDatabase.newSchemaName();

    @DynamicPropertySource
    static void properties(DynamicPropertyRegistry r) {
        TestDatabase.register(r, SCHEMA);
        r.add("spring.jpa.hibernate.ddl-auto", () -> "create");
        r.add("spring.jpa.open-in-view", () -> "false");
        r.add("spring.jpa.properties.hibernate.default_schema", () -> SCHEMA);
        r.add("spring.jpa.properties.hibernate.hbm2ddl.create_namespaces", () -> "true");
    }

    /** Drops the test schema once the context has closed. */
    @TestConfiguration
    static class DropSchema implements DisposableBean {
        @Override
        public void destroy() throws Exception {
            TestDatabase.drop(SCHEMA);
        }
    }

    @Autowired PlatformTransactionManager transactions;
    @Autowired Billing billing;
    @Autowired Invoices invoices;
    @Autowired RdqClient client;

    @Test
    void theApplicationsTransactionsAreJpas() {
        assertInstanceOf(JpaTransactionManager.class, transactions);
    }

    @Test
    void aTaskSubmittedInAJpaTransactionRollsBackWithIt() {
        UUID id = UUID.randomUUID();
        IllegalStateException e = assertThrows(IllegalStateException.class, () -> billing.bill(id, "acme", true));
        assertEquals("card declined", e.getMessage());
        assertFalse(invoices.existsById(id), "the invoice rolled back");
        assertTrue(client.get(id).isEmpty(), "the task rolled back with the invoice");
    }

    @Test
    void aTaskSubmittedInAJpaTransactionCommitsWithIt() {
        UUID id = UUID.randomUUID();
        billing.bill(id, "acme", false);
        assertEquals("acme", invoices.findById(id).orElseThrow().customer());
        assertEquals(Status.PENDING, client.get(id).orElseThrow().status());
    }
}
