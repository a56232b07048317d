package io.github.srjn45.rdq.spring.jpa;

import java.util.UUID;
import org.springframework.data.jpa.repository.JpaRepository;

/** The invoices' repository. */
public interface Invoices extends JpaRepository<Invoice, UUID> {}
