/**
 * Spring Boot auto-configuration for rdq. Types are non-null unless annotated
 * {@code @Nullable}.
 */
@NullMarked
package io.github.srjn45.rdq.spring;

import org.jspecify.annotations.NullMarked;
