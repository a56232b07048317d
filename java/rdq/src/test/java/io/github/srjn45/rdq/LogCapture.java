package io.github.srjn45.rdq;

import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import java.util.List;
import org.slf4j.LoggerFactory;

/** Captures what the SDK logs, at every level from DEBUG, while open. */
final class LogCapture implements AutoCloseable {
    private final Logger logger = (Logger) LoggerFactory.getLogger("io.github.srjn45.rdq");
    private final Level before = logger.getLevel();
    private final ListAppender<ILoggingEvent> appender = new ListAppender<>();

    LogCapture() {
        appender.start();
        logger.addAppender(appender);
        logger.setLevel(Level.DEBUG);
    }

    /** The events logged so far. */
    List<ILoggingEvent> events() {
        synchronized (appender.list) {
            return List.copyOf(appender.list);
        }
    }

    /** Every event so far as "LEVEL formatted message", one a line. */
    String text() {
        StringBuilder b = new StringBuilder();
        for (ILoggingEvent e : events()) {
            b.append(e.getLevel()).append(' ').append(e.getFormattedMessage()).append('\n');
        }
        return b.toString();
    }

    @Override
    public void close() {
        logger.detachAppender(appender);
        logger.setLevel(before);
        appender.stop();
    }
}
