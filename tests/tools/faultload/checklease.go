package main

import (
	"fmt"
	"sort"
	"time"
)

// leaseEarly is how much before its surely-alive end a lease's key may
// go. From etcd 3.4's lessor (lease/lessor.go): the primary renews a
// lease when it handles the keepalive (Renew, refresh(0): expiry = now +
// TTL), which is after the client sent it, so no earlier than the
// keepalive's call + TTL; a grant is refreshed likewise when the primary
// applies it. A member that becomes leader moves every expiry to now +
// remaining TTL + the election timeout (Promote, called so by
// etcdserver/server.go), later, not earlier; expired leases are found by
// a loop every 500 ms and revoked through Raft, later again; remaining-
// TTL checkpoints concern only leases longer than their interval (5 min
// by default), not these. So the allowance is the renewal's round trip
// (the call, not the answer, counts as the renewal) plus 100 ms for the
// two clocks (the member's monotonic one, faultload's wall clock). It
// rests on one more thing the lessor does not see: a leader that lost
// its quorum stops renewing before the extension its successor gave
// runs out (check-quorum steps it down within an election timeout); a
// leader stopped longer than that may renew on resuming a lease its
// successor already revoked, and that shows here as an early expiry.
const leaseEarly = 100 * time.Millisecond

// checkLease checks a lease history, lease by lease (keys are attached
// to one lease each, by ok or indeterminate writes):
//
//   - never early: the lease was surely alive until the latest call of
//     an ok grant or keepalive plus the TTL it answered, less
//     leaseEarly; none of its keys may be seen deleted (a watcher got
//     the delete: it happened by then) before that, and no keepalive or
//     write may be told the lease is gone before that.
//   - at most once: once the lease is known gone (a delete of one of
//     its keys seen, or a server saying so), no keepalive or write with
//     it called later may succeed, and no key of it may be put again; all
//     its keys go at one revision (a revoke is one txn), each once.
//   - lapses: once the lease is past the end of its last grant or
//     keepalive (ok or indeterminate) + its TTL + leaseFinalAfter (the
//     primary's 500 ms loop, a new leader's extension by the election
//     timeout, the revoke's trip through Raft, a keepalive a follower
//     forwarded late), the final read must not show its keys. The run
//     ends with every fault healed, so only that read is held to it:
//     under faults revokes may wait for a leader as long as they last.
func checkLease(ops []Op, s *summary, lim checkLimits) {
	t0 := firstCall(ops)
	type leaseInfo struct {
		id       int64
		ttl      int64
		alive    int64 // surely alive until
		aliveBy  *Op
		renewEnd int64 // end of the last grant or keepalive that may have renewed it, + TTL
		goneAt   int64 // known gone by (0: not known)
		goneBy   string
		keys     []string
		ops      []*Op
	}
	leases := map[int64]*leaseInfo{}
	get := func(id int64) *leaseInfo {
		l := leases[id]
		if l == nil {
			l = &leaseInfo{id: id}
			leases[id] = l
		}
		return l
	}
	keyLease := map[string]*leaseInfo{}
	type deletion struct {
		rev  int64
		seen int64
		by   *Op
	}
	deleted := map[string]*deletion{}
	var final *Op
	var watches []*Op
	for i := range ops {
		op := &ops[i]
		switch op.F {
		case "grant", "keepalive":
			if op.Lease == 0 {
				continue
			}
			l := get(op.Lease)
			l.ops = append(l.ops, op)
			if op.F == "grant" && op.Type == typeOK {
				l.ttl = op.TTL
			}
		case "write":
			if op.Lease == 0 || op.Key == "" {
				s.anomaly("a write with no lease or key: %s", describe(op, t0))
				continue
			}
			l := get(op.Lease)
			l.ops = append(l.ops, op)
			if op.Type != typeFail {
				if other := keyLease[op.Key]; other != nil && other != l {
					s.anomaly("key %s attached to two leases, %x and %x (the workload attaches each key once): %s",
						op.Key, other.id, l.id, describe(op, t0))
					continue
				}
				if keyLease[op.Key] == nil {
					l.keys = append(l.keys, op.Key)
				}
				keyLease[op.Key] = l
			}
		case "watch":
			watches = append(watches, op)
			for _, ev := range op.Events {
				if ev.Type != "delete" {
					continue
				}
				d := deleted[ev.Key]
				switch {
				case d == nil:
					deleted[ev.Key] = &deletion{ev.Mod, op.Ret, op}
				case d.rev != ev.Mod:
					s.anomaly("key %s deleted twice, at revisions %d and %d: %s", ev.Key, d.rev, ev.Mod, describe(op, t0))
				case op.Ret < d.seen:
					d.seen, d.by = op.Ret, op
				}
			}
		case "watch-open", "watch-cancel", "watch-end":
		case "read":
			if op.Final && op.Type == typeOK && (final == nil || op.Ret > final.Ret) {
				final = op
			}
		default:
			s.anomaly("operation %q is not one of the lease workload's: %s", op.F, describe(op, t0))
		}
	}
	// a key put again after its delete
	for _, op := range watches {
		for _, ev := range op.Events {
			if d := deleted[ev.Key]; ev.Type == "put" && d != nil && ev.Mod > d.rev {
				s.anomaly("key %s put again at revision %d after its lease's delete at %d: %s", ev.Key, ev.Mod, d.rev, describe(op, t0))
			}
		}
	}
	ids := make([]int64, 0, len(leases))
	for id := range leases {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	unchecked := 0
	for _, id := range ids {
		l := leases[id]
		if l.ttl == 0 {
			// no ok grant: a lease the workload never had for sure
			continue
		}
		// when it was known gone: a server said so, or a delete of one
		// of its keys was seen
		for _, op := range l.ops {
			if op.Gone && (l.goneAt == 0 || op.Ret < l.goneAt) {
				l.goneAt, l.goneBy = op.Ret, describe(op, t0)
			}
		}
		revs := map[int64]string{}
		for _, k := range l.keys {
			if d := deleted[k]; d != nil {
				revs[d.rev] = k
				if l.goneAt == 0 || d.seen < l.goneAt {
					l.goneAt, l.goneBy = d.seen, fmt.Sprintf("the delete of %s at revision %d seen by %s", k, d.rev, describe(d.by, t0))
				}
			}
		}
		if len(revs) > 1 {
			s.anomaly("the keys of lease %x deleted at %d revisions (a revoke is one): %v", l.id, len(revs), revs)
		}
		// what the operations on it say: until when it was surely alive
		// (renewals called before it was known gone; one called after
		// is an anomaly of its own), until when it may have been renewed
		for _, op := range l.ops {
			ttl := op.TTL
			if op.F == "write" || ttl <= 0 {
				ttl = l.ttl
			}
			if (op.F == "grant" || op.F == "keepalive") && op.Type != typeFail {
				if end := op.Ret + ttl*1e9; end > l.renewEnd {
					l.renewEnd = end
				}
			}
			switch {
			case op.Type != typeOK:
			case l.goneAt != 0 && op.Call > l.goneAt && op.F != "grant":
				s.anomaly("lease %x used after it was gone (by %.3f ms: %s): %s", l.id, ms(l.goneAt, t0), l.goneBy, describe(op, t0))
			case op.F != "write":
				if until := op.Call + op.TTL*1e9 - int64(leaseEarly); until > l.alive {
					l.alive, l.aliveBy = until, op
				}
			}
		}
		for _, k := range l.keys {
			if d := deleted[k]; d != nil && d.seen < l.alive {
				s.anomaly("key %s of lease %x deleted (revision %d, seen at %.3f ms) while the lease was surely alive until %.3f ms: %s; the renewal: %s",
					k, l.id, d.rev, ms(d.seen, t0), ms(l.alive, t0), describe(d.by, t0), describe(l.aliveBy, t0))
			}
		}
		for _, op := range l.ops {
			if op.Gone && op.Ret < l.alive {
				s.anomaly("lease %x said gone while surely alive until %.3f ms: %s; the renewal: %s",
					l.id, ms(l.alive, t0), describe(op, t0), describe(l.aliveBy, t0))
			}
		}
		// the lapse bound, at the final read
		if final == nil {
			continue
		}
		if final.Call < l.renewEnd+int64(leaseFinalAfter) {
			unchecked++
			continue
		}
		for _, r := range final.Reads {
			if r.Found && keyLease[r.Key] == l {
				s.anomaly("key %s of lease %x still there at the final read, %.1f s after the lease could last have lapsed (TTL %d s): %s",
					r.Key, l.id, float64(final.Call-l.renewEnd)/1e9, l.ttl, describe(final, t0))
			}
		}
	}
	switch {
	case final == nil:
		s.details = append(s.details, "note: no ok final read; the lapse of leases is not checked")
	case unchecked > 0:
		s.details = append(s.details, fmt.Sprintf("note: the final read came before %d leases could have lapsed; their lapse is not checked", unchecked))
	}
}

// ms is t in milliseconds from t0.
func ms(t, t0 int64) float64 { return float64(t-t0) / 1e6 }
