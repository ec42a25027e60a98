// How HTTP outcomes map to retry decisions (the table in the README).
#pragma once

#include <steadfast/engine/classify.hpp>
#include <steadfast/transport/client.hpp>

#include <chrono>
#include <functional>

namespace steadfast::http {

struct classifier_options {
    bool retry_500 = true;  // 500 is retryable unless turned off
    /// The request may be repeated after it was (partly) sent: an idempotent
    /// method, or a request carrying an Idempotency-Key. Set by make_classifier.
    bool repeatable = false;
};

/// Classifies one outcome:
/// - 2xx: success. 408, 429, 502, 503, 504 (and 500 unless turned off):
///   retryable, with Retry-After as the delay hint. Any other status:
///   permanent (error carries the status).
/// - Transport failures before anything was sent (refused, connect timeout,
///   temporary DNS failure, reset during connect): retryable. After the
///   request was sent (reset, broken pipe, read timeout, truncated or garbage
///   answer): retryable only when the request is repeatable, else permanent.
/// - TLS: a reset, a timeout or a close during the handshake is retryable
///   like any connect failure; a certificate that does not verify, a wrong
///   name or a protocol mismatch (TLS to a plain server) is permanent.
/// - Host not found (authoritative) and any other error: permanent.
///   Cancellation: cancelled.
classification classify(const outcome& o, const classifier_options& opts,
                        std::chrono::system_clock::time_point now = std::chrono::system_clock::now());

/// A classifier for retry()/classified(): decides `repeatable` from the request.
std::function<classification(const outcome&)> make_classifier(const request& req, classifier_options opts = {});

/// Whether `ec` is an error of OpenSSL's: a certificate, a name, a protocol
/// mismatch, a refused client certificate (not a reset, a timeout or a
/// connection closed without close_notify).
bool is_tls_error(const error_code& ec) noexcept;

/// The error code for an HTTP status (category "http-status"), so that a
/// permanent 4xx shows up in retry_result::last_error().
error_code status_error(unsigned status);

}  // namespace steadfast::http
