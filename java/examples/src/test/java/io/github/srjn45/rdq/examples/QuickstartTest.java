package io.github.srjn45.rdq.examples;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.srjn45.rdq.examples.quickstart.Quickstart;
import io.github.srjn45.rdq.testkit.Schemas;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

class QuickstartTest {
    @Test
    void quickstartRetriesThenDeadLetters() throws Exception {
        DataSource ds = Schemas.testDataSource();
        String schema = Schemas.create(ds);
        try {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            Quickstart.run(ds, schema, new PrintStream(buf, true, StandardCharsets.UTF_8));
            String out = buf.toString(StandardCharsets.UTF_8);
            assertTrue(out.contains("1. send-receipt SUCCEEDED after 3 attempts"), out);
            assertTrue(out.contains("attempt 1  life 0  RETRYABLE_FAILURE java.net.ConnectException: smtp dial: connection refused (attempt 1)"), out);
            assertTrue(out.contains("attempt 3  life 0  SUCCESS"), out);
            assertTrue(out.contains("2. charge-card DEAD after 3 attempts; in the DLQ as gateway_error"), out);
            assertTrue(out.contains("3. gateway fixed, task redriven: charge-card SUCCEEDED in life 1"), out);
            assertTrue(out.contains("attempt 4  life 1  SUCCESS"), out);
            assertTrue(out.contains("rdq dlq redrive --fingerprint "), out);
        } finally {
            Schemas.drop(ds, schema);
        }
    }
}
