package io.github.srjn45.rdq.spring.jpa;

import io.github.srjn45.rdq.NewTask;
import io.github.srjn45.rdq.RdqClient;
import java.util.UUID;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

/** Bills a customer: the invoice and the task that mails it commit or roll back together. */
@Service
public class Billing {
    private final Invoices invoices;
    private final RdqClient rdq;

    /** The service on the repository and the starter's client. */
    public Billing(Invoices invoices, RdqClient rdq) {
        this.invoices = invoices;
        this.rdq = rdq;
    }

    /**
     * Saves an invoice with the ID id and submits its mail task with the same ID, then
     * fails when fail is true: the transaction rolls back.
     */
    @Transactional
    public void bill(UUID id, String customer, boolean fail) {
        invoices.saveAndFlush(new Invoice(id, customer));
        rdq.submit(NewTask.builder("invoices", "mail-invoice").id(id).payload(customer).build());
        if (fail) {
            throw new IllegalStateException("card declined");
        }
    }
}
