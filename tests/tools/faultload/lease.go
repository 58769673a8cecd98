package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/etcdserver/api/v3rpc/rpctypes"
)

// runLease is the lease workload: each client in turn grants a lease of
// 2 to 4 s, attaches one or two keys of its own to it (a Put with the
// lease), then either keeps it alive (a KeepAliveOnce every third of its
// TTL, for one to three TTLs) or not, and lets it lapse. A lapsed lease
// is probed once its TTL and leaseProbeAfter have passed since it could
// last have been renewed: a KeepAliveOnce and a Put of a new key with
// it, which must both fail once the lease has expired (the checker
// knows when from the watchers). Watchers on every member watch the
// keys' range and record each event with the time it came. After the
// run every lease lapses; once each is past leaseFinalAfter, the range
// is read once more (the final read: no key may be left).
//
// History lines: grant (lease, ttl: as granted), write (key, value,
// lease: a key attached), keepalive (lease, ttl: as answered), with
// gone=true when the server said the lease does not exist (also on a
// write), the watchers' watch-open, watch and watch-cancel as in the
// watch workload, and the final read (reads).
func runLease(ctx context.Context, cfg *config, rec *recorder) {
	prefix := cfg.prefix + "l/"
	start, err := startRevision(cfg)
	if err != nil {
		logf("no member told the current revision: %v", err)
		return
	}
	_, stopWatchers := startWatchers(cfg, rec, prefix, start)
	var lastRenew int64 // the latest end of a grant or keepalive, +TTL
	runWorkers(ctx, cfg, rec, func(ctx context.Context, w *worker) { leaseClient(ctx, w, prefix, &lastRenew) })
	// every lease lapses now; the final read comes when all are past
	// the bound the checker holds them to
	until := time.Unix(0, atomic.LoadInt64(&lastRenew)).Add(leaseFinalAfter + 200*time.Millisecond)
	if d := time.Until(until); d > 0 {
		logf("waiting %.1f s for every lease to lapse", d.Seconds())
		time.Sleep(d)
	}
	finalPrefixRead(cfg, rec, prefix)
	// a moment for the watchers to see the last revokes
	time.Sleep(500 * time.Millisecond)
	stopWatchers()
}

const (
	// leaseProbeAfter is how long after its TTL has run out, counted
	// from when it could last have been renewed, a lapsed lease is
	// probed (it may well be alive still: a new leader extends every
	// lease; the checker decides from what the watchers saw).
	leaseProbeAfter = 2 * time.Second
	// leaseFinalAfter: see checkLease (the lapse bound).
	leaseFinalAfter = 5 * time.Second
)

// aLease is one lease of a lease client.
type aLease struct {
	id   clientv3.LeaseID
	ttl  time.Duration
	end  time.Time // when it could last have been renewed (the end of its last grant or keepalive)
	seq  int
	keys int
}

func leaseClient(ctx context.Context, w *worker, prefix string, lastRenew *int64) {
	var lapsed []*aLease
	notice := func(l *aLease, op *Op) {
		end := time.Unix(0, op.Ret)
		if end.After(l.end) {
			l.end = end
		}
		for {
			v := atomic.LoadInt64(lastRenew)
			t := l.end.Add(l.ttl).UnixNano()
			if t <= v || atomic.CompareAndSwapInt64(lastRenew, v, t) {
				return
			}
		}
	}
	keepalive := func(l *aLease) {
		op := Op{F: "keepalive", Lease: int64(l.id)}
		w.do(&op, func(ctx context.Context) error {
			resp, err := w.cli.KeepAliveOnce(ctx, l.id)
			if err == nil {
				op.TTL = resp.TTL
			}
			op.Gone = leaseGone(err)
			return err
		})
		if op.Type != typeFail {
			notice(l, &op)
		}
	}
	attach := func(l *aLease) {
		op := Op{F: "write", Key: fmt.Sprintf("%s%d-%d-%d", prefix, w.id, l.seq, l.keys),
			Value: fmt.Sprintf("c%d-%d-%d", w.id, l.seq, l.keys), Lease: int64(l.id)}
		l.keys++
		w.do(&op, func(ctx context.Context) error {
			resp, err := w.cli.Put(ctx, op.Key, op.Value, clientv3.WithLease(l.id))
			if err == nil {
				op.Rev = resp.Header.Revision
			}
			op.Gone = leaseGone(err)
			return err
		})
	}
	// probe the lapsed leases whose time has come
	probe := func() {
		kept := lapsed[:0]
		for _, l := range lapsed {
			if time.Now().Before(l.end.Add(l.ttl + leaseProbeAfter)) {
				kept = append(kept, l)
				continue
			}
			keepalive(l)
			attach(l)
		}
		lapsed = kept
	}
	for seq := 0; ctx.Err() == nil; seq++ {
		probe()
		ttl := int64(2 + w.rng.Intn(3))
		g := Op{F: "grant", TTL: ttl}
		l := &aLease{seq: seq}
		if w.do(&g, func(ctx context.Context) error {
			resp, err := w.cli.Grant(ctx, ttl)
			if err == nil {
				l.id, g.Lease, g.TTL = resp.ID, int64(resp.ID), resp.TTL
			}
			return err
		}) != nil {
			continue
		}
		l.ttl = time.Duration(g.TTL) * time.Second
		notice(l, &g)
		for k := 1 + w.rng.Intn(2); k > 0; k-- {
			attach(l)
		}
		keep := w.rng.Intn(5) < 3
		hold := time.Now().Add(time.Duration(1+w.rng.Intn(3)) * l.ttl)
		for ctx.Err() == nil && time.Now().Before(hold) {
			select {
			case <-ctx.Done():
			case <-time.After(l.ttl / 3):
			}
			if keep && ctx.Err() == nil {
				keepalive(l)
			}
			probe()
		}
		lapsed = append(lapsed, l)
	}
}

// leaseGone reports whether err is the server's "requested lease not
// found".
func leaseGone(err error) bool {
	return err != nil && rpctypes.ErrorDesc(err) == rpctypes.ErrorDesc(rpctypes.ErrGRPCLeaseNotFound)
}
