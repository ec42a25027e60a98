// What the daemons and nodes say about a NATS connection that cannot work
// (jetstream::client::problem()): the /ready and /health status, and the
// hint of the log line. One place, for the primary's link and the
// secondary's source.
#pragma once

#include <string>

namespace steadfast::app {

struct nats_problem_text {
    const char* status;  // nats_credentials_refused, nats_tls_mismatch, nats_connection_closed
    const char* hint;
};

inline nats_problem_text describe_nats_problem(const std::string& problem) {
    if (problem.rfind("credentials_refused", 0) == 0)
        return {"nats_credentials_refused",
                "check --nats-user/--nats-password-file, --nats-token-file or --nats-creds against the NATS servers' "
                "authorization; the refused connection is closed: restart once it is fixed"};
    if (problem.rfind("tls_mismatch", 0) == 0)
        return {"nats_tls_mismatch",
                "a tls:// URL (or --nats-tls) for servers that require TLS, a nats:// one for servers without it; "
                "--nats-ca for the CA that signed their certificates, --nats-cert/--nats-key if they verify clients; "
                "the refused connection is closed: restart once it is fixed"};
    return {"nats_connection_closed",
            "the NATS connection closed for good (a server that accepted it and then did not answer?): restart"};
}

}  // namespace steadfast::app
