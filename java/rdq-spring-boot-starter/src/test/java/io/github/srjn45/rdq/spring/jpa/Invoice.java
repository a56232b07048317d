package io.github.srjn45.rdq.spring.jpa;

import jakarta.persistence.Entity;
import jakarta.persistence.Id;
import java.util.UUID;

/** An invoice, stored by JPA. */
@Entity
public class Invoice {
    @Id
    private UUID id;
    private String customer;

    /** For JPA. */
    protected Invoice() {}

    /** An invoice for customer. */
    public Invoice(UUID id, String customer) {
        this.id = id;
        this.customer = customer;
    }

    /** The invoice's customer. */
    public String customer() {
        return customer;
    }
}
