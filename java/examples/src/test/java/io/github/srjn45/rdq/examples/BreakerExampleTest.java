package io.github.srjn45.rdq.examples;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.srjn45.rdq.examples.breaker.BreakerExample;
import io.github.srjn45.rdq.testkit.Schemas;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;

class BreakerExampleTest {
    @Test
    void theBreakerPausesTheHandlerAndAProbeResumesIt() throws Exception {
        DataSource ds = Schemas.testDataSource();
        String schema = Schemas.create(ds);
        try {
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            BreakerExample.run(ds, schema, new PrintStream(buf, true, StandardCharsets.UTF_8));
            String out = buf.toString(StandardCharsets.UTF_8);
            assertTrue(out.contains("1. breaker opened: payments/charge paused by breaker: "), out);
            assertTrue(out.contains("distinct tasks with one cause"), out);
            java.util.regex.Matcher m = java.util.regex.Pattern.compile("2\\. waiting meanwhile: (\\d+) retrying, (\\d+) never tried")
                    .matcher(out);
            assertTrue(m.find(), out);
            assertTrue(Integer.parseInt(m.group(1)) >= 3, "the three orders that failed alike wait to be retried: " + out);
            assertEquals(8, Integer.parseInt(m.group(1)) + Integer.parseInt(m.group(2)), "every order waits: " + out);
            assertTrue(out.contains("3. gateway back: one probe succeeded, the handler resumed, all 8 orders charged"), out);
            assertTrue(out.contains("audit: pause_handler {\"handler\":\"charge\",\"queue\":\"payments\"}"), out);
            assertTrue(out.contains("audit: resume_handler {\"handler\":\"charge\",\"queue\":\"payments\"} probe succeeded"), out);
        } finally {
            Schemas.drop(ds, schema);
        }
    }
}
