/**
 * The rdq client, worker and operations API for Java, on the PostgreSQL schema
 * of Go's pgstore. Types are non-null unless annotated {@code @Nullable}; a
 * method given null where it takes none throws a {@link java.lang.NullPointerException}
 * naming the method.
 */
@NullMarked
package io.github.srjn45.rdq;

import org.jspecify.annotations.NullMarked;
