package io.github.srjn45.rdq;

/**
 * The permanent failure of a task whose handler name no worker handler is
 * registered under. Its error type is "unknown_handler", as in Go.
 */
public final class UnknownHandlerException extends RuntimeException implements ErrorTyped {
    private static final long serialVersionUID = 1L;

    /** Creates the failure for a handler name and the queue it came from. */
    public UnknownHandlerException(String handler, String queue) {
        super("no handler named \"" + handler + "\" is registered on the worker running queue \"" + queue + "\"");
    }

    @Override
    public String errorType() {
        return "unknown_handler";
    }
}
