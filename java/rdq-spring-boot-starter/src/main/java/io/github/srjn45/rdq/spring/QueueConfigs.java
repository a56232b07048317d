package io.github.srjn45.rdq.spring;

import io.github.srjn45.rdq.Breaker;
import io.github.srjn45.rdq.InvalidInputException;
import io.github.srjn45.rdq.Policy;
import io.github.srjn45.rdq.QueueConfig;
import java.time.Duration;
import org.springframework.boot.context.properties.source.InvalidConfigurationPropertyValueException;

/**
 * Turns {@code rdq.queues.<name>} properties into the SDK's {@link QueueConfig}.
 * A property left unset is not passed, so the builder's default applies; a zero
 * or negative value is refused here, naming the property.
 */
final class QueueConfigs {
    private QueueConfigs() {}

    static QueueConfig of(String queue, RdqProperties.Queue q) {
        String p = "rdq.queues." + queue + ".";
        QueueConfig.Builder b = QueueConfig.builder().policy(policy(p + "policy.", q.getPolicy()));
        if (q.getConcurrency() != null) {
            b.concurrency(positive(p + "concurrency", q.getConcurrency()));
        }
        if (q.getLease() != null) {
            b.lease(positive(p + "lease", q.getLease()));
        }
        if (q.getHeartbeatInterval() != null) {
            b.heartbeatInterval(positive(p + "heartbeat-interval", q.getHeartbeatInterval()));
        }
        if (q.isNoTimeout()) {
            if (q.getTimeout() != null) {
                throw new InvalidConfigurationPropertyValueException(p + "timeout", q.getTimeout(),
                        p + "no-timeout is true as well: set one of them");
            }
            b.noTimeout();
        } else if (q.getTimeout() != null) {
            b.timeout(positive(p + "timeout", q.getTimeout()));
        }
        RdqProperties.Breaker br = q.getBreaker();
        if (br.isEnabled()) {
            b.breaker(breaker(p + "breaker.", br));
        } else if (br.anySet()) {
            throw new InvalidConfigurationPropertyValueException(p + "breaker.enabled", false,
                    "the breaker's settings are given but it is off: set " + p + "breaker.enabled=true, or remove them");
        }
        try {
            return b.build();
        } catch (InvalidInputException e) {
            throw new InvalidConfigurationPropertyValueException("rdq.queues." + queue, queue, e.getMessage());
        }
    }

    static Breaker breaker(String p, RdqProperties.Breaker q) {
        Breaker.Builder b = Breaker.builder();
        if (q.getWindow() != null) {
            b.window(positive(p + "window", q.getWindow()));
        }
        if (q.getMinFailedTasks() != null) {
            b.minFailedTasks(positive(p + "min-failed-tasks", q.getMinFailedTasks()));
        }
        if (q.getFailureRatio() != null) {
            double r = q.getFailureRatio();
            if (!(r > 0 && r <= 1)) {
                throw new InvalidConfigurationPropertyValueException(p + "failure-ratio", r,
                        "the failed share of attempts that trips the breaker must be in (0, 1]");
            }
            b.failureRatio(r);
        }
        if (q.getCoolOff() != null) {
            b.coolOff(positive(p + "cool-off", q.getCoolOff()));
        }
        if (q.getMaxCoolOff() != null) {
            b.maxCoolOff(positive(p + "max-cool-off", q.getMaxCoolOff()));
        }
        try {
            return b.build();
        } catch (InvalidInputException e) {
            throw new InvalidConfigurationPropertyValueException(p.substring(0, p.length() - 1), "", e.getMessage());
        }
    }

    static Policy policy(String p, RdqProperties.Policy q) {
        Policy.Builder b = Policy.builder();
        if (q.isUnlimitedAttempts()) {
            if (q.getMaxAttempts() != null) {
                throw new InvalidConfigurationPropertyValueException(p + "max-attempts", q.getMaxAttempts(),
                        p + "unlimited-attempts is true as well: set one of them");
            }
            b.unlimitedAttempts();
        } else if (q.getMaxAttempts() != null) {
            b.maxAttempts(positive(p + "max-attempts", q.getMaxAttempts()));
        }
        if (q.getInitialBackoff() != null) {
            b.initialBackoff(positive(p + "initial-backoff", q.getInitialBackoff()));
        }
        if (q.getMultiplier() != null) {
            double m = q.getMultiplier();
            if (!(m >= 1) || Double.isInfinite(m)) {
                throw new InvalidConfigurationPropertyValueException(p + "multiplier", m,
                        "the delay's growth per attempt must be a finite number of at least 1");
            }
            b.multiplier(m);
        }
        if (q.getMaxBackoff() != null) {
            b.maxBackoff(positive(p + "max-backoff", q.getMaxBackoff()));
        }
        if (q.getJitter() != null) {
            double j = q.getJitter();
            if (!(j >= 0 && j <= 1)) {
                throw new InvalidConfigurationPropertyValueException(p + "jitter", j,
                        "jitter is the fraction in [0, 1] by which a delay may be shortened; 0 for none");
            }
            b.jitter(j);
        }
        try {
            if (q.getTaskMaxAttempts() != null) {
                b.taskMaxAttempts(positive(p + "task-max-attempts", q.getTaskMaxAttempts()));
            }
            if (q.getTaskMaxTimeout() != null) {
                b.taskMaxTimeout(q.getTaskMaxTimeout());
            }
            if (q.getMaxSnoozes() != null) {
                b.maxSnoozes(q.getMaxSnoozes());
            }
            return b.build();
        } catch (InvalidInputException e) {
            throw new InvalidConfigurationPropertyValueException(p.substring(0, p.length() - 1), "", e.getMessage());
        }
    }

    private static int positive(String name, int n) {
        if (n < 1) {
            throw new InvalidConfigurationPropertyValueException(name, n,
                    "give a positive number, or leave the property unset for the default");
        }
        return n;
    }

    private static Duration positive(String name, Duration d) {
        if (d.isNegative() || d.isZero()) {
            throw new InvalidConfigurationPropertyValueException(name, d,
                    "give a positive duration, or leave the property unset for the default");
        }
        return d;
    }
}
