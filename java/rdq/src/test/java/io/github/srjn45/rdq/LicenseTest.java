package io.github.srjn45.rdq;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

/** The SDK's jar carries the repository's LICENSE and NOTICE in META-INF. */
class LicenseTest {
    @Test
    void theJarCarriesTheLicenseAndTheNotice() throws Exception {
        // The directory (or jar) the SDK's classes were loaded from, not another jar's META-INF.
        Path classes = Path.of(Worker.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        assertTrue(Files.isDirectory(classes), "classes loaded from " + classes);
        Path license = classes.resolve("META-INF/LICENSE");
        Path notice = classes.resolve("META-INF/NOTICE");
        assertTrue(Files.isRegularFile(license), "no " + license);
        assertTrue(Files.isRegularFile(notice), "no " + notice);
        String l = Files.readString(license, StandardCharsets.UTF_8);
        assertTrue(l.contains("Apache License") && l.contains("Version 2.0, January 2004"), "META-INF/LICENSE is not the Apache License 2.0");
        assertTrue(l.equals(Files.readString(TestDb.repoRoot().resolve("LICENSE"), StandardCharsets.UTF_8)),
                "META-INF/LICENSE differs from the repository's LICENSE");
        assertTrue(Files.readString(notice, StandardCharsets.UTF_8).startsWith("rdq\n"), "META-INF/NOTICE is not rdq's NOTICE");
    }
}
