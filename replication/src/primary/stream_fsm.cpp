#include "stream_fsm.hpp"

#include "window.hpp"

#include <steadfast/replication/envelope.hpp>

#include <algorithm>
#include <iterator>

// reenter and yield: the loop below, as straight-line code (Boost.Asio's
// stackless coroutine, as in Boost.Redis' run_fsm); undefined at the end.
#include <boost/asio/yield.hpp>

namespace steadfast::primary {

using type = stream_action::type;

stream_fsm::stream_fsm(const delivery_config& c, std::string stream, std::uint64_t acked, std::uint64_t acked_max,
                       std::uint64_t pending)
    : c_(c), stream_(std::move(stream)), pos_(acked, acked_max, pending), sync_log_(c.reads_log) {}

void stream_fsm::committed(std::size_t n, pending_message* one, bool online) {
    pos_.committed(n);
    // Joins the window if it continues it (window.hpp); else it is read back.
    window_.committed(one, online);
}

bool stream_fsm::resend_last() {
    // Not while messages are pending (the next send finds out), nor again
    // while a resend is on its way (acked < acked_max).
    if (!pos_.resend_last()) return false;
    window_.forget();
    return true;
}

stream_action stream_fsm::act(type t) {
    stream_action a;
    a.what = t;
    a.clear_commit = std::exchange(before_.clear_commit, false);
    a.clear_retry_now = std::exchange(before_.clear_retry_now, false);
    a.check_drained = std::exchange(before_.drained, false);
    return a;
}

stream_action stream_fsm::wait(std::optional<std::chrono::milliseconds> delay, unsigned wake_on) {
    stream_action a = act(type::wait);
    a.delay = delay;
    a.wake_on = static_cast<unsigned char>(wake_on | stream_action::on_stop);
    return a;
}

stream_action stream_fsm::finish() {
    stream_action a = act(type::done);
    return a;
}

// The secondary applied up to `upto`: only messages never acknowledged before
// count as delivered (a rewind resends some).
stream_action stream_fsm::acknowledge(std::uint64_t upto) {
    stream_action a = act(type::acknowledged);
    a.upto = upto;
    const auto p = pos_.acknowledge(upto);
    a.first_fresh = p.first_fresh;
    a.delivered = p.delivered;
    return a;
}

stream_action stream_fsm::resume(stream_event& ev) {
    reenter(coro_) {
        while (!ev.stop) {
            // The last pass's batch is done with: not kept through the waits
            // below (a stream on the ladder would hold up to a request's body).
            batch_ = std::vector<pending_message>();
            if (window_.empty() && reading_ahead()) {
                // The read-ahead is still running: wait for it rather than read twice.
                yield return wait(std::nullopt, stream_action::on_read_ahead);
                if (ev.stop) break;
            }
            if (window_.size() < c_.batch_max) window_.take_read_ahead();
            if (window_.empty()) {
                before_.clear_commit = true;
                if (window_.settled(pos_.acked())) {
                    // Wait a little for more, then retire; but first one
                    // read: the stream ends only when the outbox says that
                    // nothing is left.
                    before_.drained = true;
                    yield return wait(c_.idle_grace, stream_action::on_commit);
                    if (ev.commit) continue;
                    window_.more_maybe();
                    retire_after_read_ = true;
                    continue;
                }
                // Nothing joins the window while it is read (a commit answered
                // meanwhile is in the read), and a window forgotten meanwhile
                // (a recheck lowers the position) is read again.
                read_gen_ = window_.begin_read();
                yield {
                    stream_action a = act(type::read);
                    a.from_position = !pos_.known();
                    a.from = a.from_position ? 0 : pos_.acked();
                    return a;
                }
                if (!ev.error.empty()) {
                    yield return failed(std::move(ev.error));
                    continue;
                }
                if (!window_.current(read_gen_)) continue;
                if (!pos_.known()) pos_.learn(ev.position);
                window_.read(pos_.acked(), ev.rows);
                if (window_.empty()) {
                    // Nothing to send: wait a little for more, then retire.
                    before_.drained = true;
                    if (retire_after_read_ && !ev.commit) break;  // waited already
                    yield return wait(c_.idle_grace, stream_action::on_commit);
                    if (!ev.commit) break;
                    retire_after_read_ = false;
                    continue;
                }
                retire_after_read_ = false;
                pos_.head(window_.front().at_ms);  // read from the acknowledged seq: the oldest pending
                sched_ = ev.sched.is_for(window_.front().seq) ? ev.sched : schedule{};
            }
            // Durable redelivery: not before the scheduled time, unless the
            // secondary just came back, or the operator asked (start,
            // SIGHUP): then at once. The ladder's step is kept: another
            // failure waits the next one.
            // A read of the log that a wrong expected sequence asked for is
            // not a redelivery: the log answered, so it is read at once.
            if (sched_.next_at_ms > ev.now_ms && !woken_by_recovery_ && !ev.retry_now && !resync_now_) {
                if (ev.online) {
                    yield return wait(std::chrono::milliseconds(sched_.next_at_ms - ev.now_ms),
                                      stream_action::on_offline | stream_action::on_retry_now);
                    if (!ev.online && !ev.stop && !ev.retry_now) {
                        // Lost during the wait: wait for it to come back.
                        yield return wait(std::nullopt, stream_action::on_online | stream_action::on_retry_now);
                        woken_by_recovery_ = true;
                    }
                } else {
                    yield return wait(std::chrono::milliseconds(sched_.next_at_ms - ev.now_ms),
                                      stream_action::on_online | stream_action::on_retry_now);
                    woken_by_recovery_ = ev.online;
                }
                if (!woken_by_recovery_ && !ev.retry_now && sched_.next_at_ms > ev.now_ms) continue;
            }
            woken_by_recovery_ = false;
            if (ev.retry_now) before_.clear_retry_now = true;

            if (sync_log_) {
                // Where does the log stand? (at start, after a wrong expected
                // sequence, after a rewind.)
                yield return act(type::sync_log);
                answer_ = {std::move(ev.d), {}, true};
                window_.forget();
                if (answer_.d.what == verdict::ack || answer_.d.what == verdict::rewind) {
                    sync_log_ = false;
                    if (std::exchange(resync_now_, false) && sched_.attempts > 0) {
                        // A publish reached the log (it answered "wrong
                        // sequence") and the log answered now: the ladder's
                        // wait is over (a lost acknowledgement is resolved
                        // from the log, and the head goes out at once, not at
                        // its stored step). The read at a processor's start
                        // proves nothing about publishing: the step is kept.
                        yield {
                            stream_action a = act(type::link_recovered);
                            a.seq =
                                answer_.d.what == verdict::ack ? std::max(pos_.acked(), answer_.d.upto) : pos_.acked();
                            a.ladder_steps = sched_.attempts;
                            return a;
                        }
                    }
                }
                resync_now_ = false;  // also when the read failed: the ladder's next step is waited
                sched_ = {};
            } else {
                // The batch: the head of the window, within the count limit
                // and the request body limit by exact encoded size. A message
                // too big to share a request goes alone. Moved out of the
                // window: on failure the window is read again anyway.
                batch_ = window_.take_batch(pos_.batch_limit(c_.batch_max), c_.body_limit, stream_, c_.epoch);
                pos_.head(batch_.front().at_ms);
                // Fewer than a batch left: read the next rows while this batch
                // is in flight, if there may be any (the last read was full,
                // or messages were committed since).
                if (window_.start_read_ahead(pos_.batch_limit(c_.batch_max))) {
                    yield return act(type::start_read_ahead);
                }
                yield return act(type::send);
                answer_ = {std::move(ev.d), ev.server_wait, false};
                if (answer_.d.what != verdict::ack) {
                    window_.forget();  // read again: the schedule or a tombstone may change what comes next
                    sched_ = {};
                }
                if (answer_.d.what == verdict::rewind) {
                    yield return act(type::rewind_facts);
                    if (!ev.error.empty()) {
                        yield return failed(std::move(ev.error));
                        continue;
                    }
                    {
                        decision& d = answer_.d;
                        std::string seen = std::move(d.detail);
                        d = decide_rewind(d.upto + 1, ev.oldest, ev.next_seq);
                        d.detail = seen + (d.detail.empty() ? std::string{} : "; " + d.detail);
                    }
                }
            }

            // What the answer (or the log) says.
            if (answer_.d.what == verdict::ack) {
                if (answer_.from_log) {
                    if (answer_.d.upto > pos_.acked()) {
                        yield return acknowledge(answer_.d.upto);
                    }
                    continue;
                }
                yield return acknowledge(answer_.d.upto);
                pos_.sent_and_acknowledged(answer_.d.upto);                // progress past a rewind
                if (answer_.d.upto < batch_.back().seq) window_.forget();  // a partial ack: the rest is read again
                if (sched_.attempts > 0) {
                    // The ladder's wait is over: say so (the last line was a
                    // link_error), and drop the schedule now, before the next
                    // read of the window could load it again.
                    yield {
                        stream_action a = act(type::link_recovered);
                        a.seq = answer_.d.upto;
                        a.ladder_steps = sched_.attempts;
                        return a;
                    }
                }
                sched_ = {};
            } else if (answer_.d.what == verdict::demote) {
                yield {
                    stream_action a = act(type::demote);
                    a.epoch = std::max(answer_.d.epoch, c_.epoch + 1);
                    return a;
                }
                break;
            } else if (answer_.d.what == verdict::isolate) {
                pos_.isolate(batch_.back().seq);  // find the message it rejects
            } else if (answer_.d.what == verdict::dead_letter) {
                if (envelope::is_tombstone(batch_.front().payload)) {
                    // Even the tombstone is refused: the request, not the
                    // message, is at fault (a header the secondary cannot
                    // parse, a proxy in the way). Dead-lettering again would
                    // loop; stop the stream and say so.
                    yield return blocked("tombstone_refused", "the secondary refused the tombstone of seq " +
                                                                  std::to_string(batch_.front().seq) +
                                                                  " too: " + answer_.d.reason);
                    break;
                }
                yield return act(type::dead_letter);
                if (!ev.ok) {
                    yield return wait(c_.storage_pause, 0);
                }
            } else if (answer_.d.what == verdict::redeliver) {
                yield {
                    stream_action a = act(type::next_step);
                    a.seq = answer_.from_log ? pos_.acked() + 1 : batch_.front().seq;
                    a.server_wait = answer_.server_wait;
                    return a;
                }
                if (!ev.ok) {
                    yield return wait(c_.storage_pause, 0);
                }
            } else if (answer_.d.what == verdict::rewind) {
                // The same rewind again without progress means that what is
                // retained has a hole (a purge after a clock step): resending
                // would loop, so the stream is blocked instead.
                if (!pos_.start_rewind(answer_.d.upto)) {
                    yield return blocked("beyond_retention", answer_.d.detail + "; the retained messages from seq " +
                                                                 std::to_string(answer_.d.upto + 1) +
                                                                 " are not contiguous");
                    break;
                }
                yield {
                    stream_action a = act(type::rewound);
                    a.seq = answer_.d.upto + 1;
                    a.detail = answer_.d.detail;
                    return a;
                }
                pos_.rewind(answer_.d.upto);
            } else if (answer_.d.what == verdict::block) {
                yield return blocked(answer_.d.reason, answer_.d.detail);
                break;
            } else if (answer_.d.what == verdict::resync) {
                sync_log_ = true;  // read the log's last message before anything else is sent
                resync_now_ = true;
            } else {
                break;  // stop
            }
        }
    }
    return finish();
}

stream_action stream_fsm::failed(std::string error) {
    stream_action a = wait(c_.storage_pause, 0);
    a.what = type::storage_failed;
    a.detail = std::move(error);
    return a;
}

stream_action stream_fsm::blocked(std::string reason, std::string detail) {
    stream_action a = act(type::block);
    a.reason = std::move(reason);
    a.detail = std::move(detail);
    return a;
}

}  // namespace steadfast::primary

#include <boost/asio/unyield.hpp>
