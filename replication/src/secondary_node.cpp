// secondary_node: the secondary's service (secondary/service.hpp) on an
// event-loop thread of its own.
#include <common/event_loop.hpp>
#include <common/log.hpp>
#include <common/names.hpp>
#include <common/thread_name.hpp>
#include <common/token.hpp>
#include <secondary/service.hpp>

#include <steadfast/replication/secondary_node.hpp>
#include <steadfast/transport/jetstream.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <prometheus/registry.h>

#include <future>
#include <stdexcept>
#include <thread>

namespace asio = boost::asio;

namespace steadfast::replication {

namespace {

secondary::service_options options_of(const secondary_config& c) {
    auto bad = [](const std::string& what) { throw std::invalid_argument("secondary_config: " + what); };
    if (c.data.empty()) bad("data (the store's directory) is empty");
    if (c.listen.empty() && c.source.empty()) bad("neither listen nor source is set: nothing would arrive");
    if (c.max_body < 1024) bad("max_body must be at least 1024");
    if (c.max_epoch_step == 0) bad("max_epoch_step must be at least 1");
    if (c.apply_attempts == 0) bad("apply_attempts must be at least 1");
    app::check_tokens(c.tokens, "secondary_config: tokens");
    secondary::service_options o;
    o.listen = c.listen;
    if (!o.listen.empty()) (void)http::parse_listen_address(o.listen);
    o.data = c.data;
    o.schema = c.schema;
    o.sync = c.fsync ? app::sync_mode::full : app::sync_mode::off;
    o.tls = c.tls;
    o.max_body = c.max_body;
    o.min_free = c.min_free_bytes;
    o.max_epoch_step = c.max_epoch_step;
    o.apply_attempts = c.apply_attempts;
    if (!c.source.empty()) {
        (void)jetstream::parse_servers(c.source);
        if (!app::valid_nats_name(c.consumer)) bad("consumer must be 1 to 64 characters of A-Z a-z 0-9 _ -");
        if (!app::valid_nats_name(c.js_stream)) bad("js_stream must be 1 to 64 characters of A-Z a-z 0-9 _ -");
        jetstream::check_security(c.nats);
        o.source.servers = c.source;
        o.source.security = c.nats;
        o.source.stream = c.js_stream;
        o.source.consumer = c.consumer;
    } else if (c.nats.any_tls() || !c.nats.user.empty() || !c.nats.token.empty() || !c.nats.creds_file.empty()) {
        bad("nats is for a JetStream source (source nats://... or tls://...)");
    }
    return o;
}

}  // namespace

struct secondary_node::impl {
    impl(secondary_config c, apply_handler apply)
        : o(options_of(c)),
          svc(o, loop.get_executor(), std::move(c.tokens), std::move(apply), {.wrap_messages = {}, .ended = [this] {
                                                                                  // Only when the destructor drains:
                                                                                  // a source that failed by itself
                                                                                  // was logged (source_failed).
                                                                                  if (!leaving) return;
                                                                                  work.reset();
                                                                                  loop.stop();
                                                                              }}) {
        svc.start();
        thread = std::thread([this] {
            app::name_this_thread("sf-secondary");
            loop.run_logged("secondary_node_failed");
        });
    }
    ~impl() {
        // A batch a slow handler is working through is given up at its next
        // message (nothing of it stays; the primary sends it again).
        svc.abandon();
        asio::post(loop, [this] {
            leaving = true;
            svc.stop();
        });
        thread.join();
        svc.close();
        loop.shutdown();
    }
    secondary::service_options o;
    app::event_loop loop{1};
    asio::executor_work_guard<asio::io_context::executor_type> work{loop.get_executor()};
    secondary::service svc;
    bool leaving = false;  // the destructor drains (loop thread)
    std::thread thread;
};

secondary_node::secondary_node(secondary_config cfg, apply_handler apply)
    : impl_(std::make_unique<impl>(std::move(cfg), std::move(apply))) {}

secondary_node::~secondary_node() = default;

asio::ip::tcp::endpoint secondary_node::local_endpoint() const {
    return impl_->svc.local_endpoint();
}

prometheus::Registry& secondary_node::metrics() {
    return *impl_->svc.series().registry;
}

}  // namespace steadfast::replication
