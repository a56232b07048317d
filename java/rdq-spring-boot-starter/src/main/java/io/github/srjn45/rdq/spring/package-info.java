/**
 * Spring Boot auto-configuration for rdq.
 */
package io.github.srjn45.rdq.spring;
