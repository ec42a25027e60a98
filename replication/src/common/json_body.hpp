// What a request carrying a JSON body must say about it in its headers,
// checked before the body is looked at: the primary's /publish and the
// secondary's /api/messages answer alike.
#pragma once

#include <steadfast/transport/http.hpp>

#include <initializer_list>
#include <optional>
#include <string_view>

namespace steadfast::app {

/// nullopt when `req`'s headers describe a plain JSON body; else the answer:
/// - Content-Type missing or not application/json (parameters such as
///   "; charset=utf-8" allowed): 415;
/// - a Content-Encoding other than identity (gzip, br, ...): 415 naming it,
///   as the body is not decoded here and would be read as JSON as it is;
/// - no body and neither Content-Length nor Transfer-Encoding: 411 (a
///   client that sent its body without saying how long it is), and the
///   connection closed;
/// - Content-Type given more than once: 415, any header named in `once`:
///   400, naming it (a proxy reading the last copy and this server the
///   first would disagree about the request). Not 400 for what a primary
///   sends: it reads a 400 from its secondary as its message's fault.
std::optional<http::response> refuse_json_body(const http::request& req,
                                               std::initializer_list<std::string_view> once = {});

}  // namespace steadfast::app
