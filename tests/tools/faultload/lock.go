package main

import (
	"context"
	"sync"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
	"go.etcd.io/etcd/etcdserver/api/v3lock/v3lockpb"
)

// runLock is the lock workload: each client holds a lease of -lock-ttl
// seconds, kept alive, and in turn takes one lock, writes a marker (its
// lock key) to a key of its own, reads its lock key (it must be there
// while the lease lives), reads the marker, holds a few milliseconds and
// releases the lock. A share -lock-rpc of the clients, spread evenly
// over them, take and release it through etcd's Lock RPC (the v3lock
// service: Lock with the lease, Unlock with the key it returned, as
// `etcdctl lock` does); the others with clientv3's concurrency.Mutex
// (the same recipe run by the client). Both name the same lock, so the
// two kinds contend with each other.
//
// A lease the client cannot show alive no longer protects the hold: the
// client takes its lease for alive up to lockMargin before -lock-ttl
// after the last keep-alive answer (or after the grant's call), and the
// unlock line carries valid_ns, the end of the hold's part during which
// the lease was alive by that rule (at most the unlock's call). After
// any error the client revokes its lease and starts again with a new
// one.
//
// History lines: grant (lease, ttl), lock (lock_key, lease; rev: the
// revision it was taken at), marker-write and marker-read (key: the
// marker key, value: the lock key written, read: what was read),
// holder-read (key: the lock key, found), unlock (valid_ns); lock and
// unlock have rpc=true when made through the Lock RPC.
func runLock(ctx context.Context, cfg *config, rec *recorder) {
	pfx := cfg.prefix + "lock"
	marker := cfg.prefix + "marker"
	runWorkers(ctx, cfg, rec, func(ctx context.Context, w *worker) {
		rpc := usesLockRPC(w.id, cfg.lockRPC)
		for ctx.Err() == nil {
			l, err := newLease(w)
			if err != nil {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			var lk locker = &mutexLocker{m: concurrency.NewMutex(l.sess, pfx)}
			if rpc {
				lk = &rpcLocker{c: v3lockpb.NewLockClient(w.cli.ActiveConnection()), name: pfx, lease: int64(l.id)}
			}
			for ctx.Err() == nil && holdOnce(w, l, lk, marker) {
			}
			l.close()
		}
	})
}

// usesLockRPC reports whether client id of the lock workload takes the
// lock through the Lock RPC: share of the clients, spread evenly.
func usesLockRPC(id int, share float64) bool {
	return int(float64(id+1)*share) > int(float64(id)*share)
}

// locker takes and releases the lock for one holder.
type locker interface {
	// lock waits for the lock; it returns the holder's key and the
	// revision the lock was taken at.
	lock(ctx context.Context) (string, int64, error)
	unlock(ctx context.Context, key string) error
	rpc() bool
}

// mutexLocker is clientv3's concurrency.Mutex on the holder's session.
type mutexLocker struct{ m *concurrency.Mutex }

func (l *mutexLocker) lock(ctx context.Context) (string, int64, error) {
	if err := l.m.Lock(ctx); err != nil {
		return "", 0, err
	}
	return l.m.Key(), l.m.Header().Revision, nil
}

func (l *mutexLocker) unlock(ctx context.Context, key string) error { return l.m.Unlock(ctx) }
func (l *mutexLocker) rpc() bool                                    { return false }

// rpcLocker is etcd's Lock RPC: the server runs the recipe with the
// holder's lease and names the key, which Unlock then deletes.
type rpcLocker struct {
	c     v3lockpb.LockClient
	name  string
	lease int64
}

func (l *rpcLocker) lock(ctx context.Context) (string, int64, error) {
	resp, err := l.c.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(l.name), Lease: l.lease})
	if err != nil {
		return "", 0, err
	}
	return string(resp.Key), resp.GetHeader().GetRevision(), nil
}

func (l *rpcLocker) unlock(ctx context.Context, key string) error {
	_, err := l.c.Unlock(ctx, &v3lockpb.UnlockRequest{Key: []byte(key)})
	return err
}

func (l *rpcLocker) rpc() bool { return true }

// lockMargin is how long before -lock-ttl after its last keep-alive
// answer a client stops counting on its lease: the answer comes after
// the leader renewed the lease, by up to a one-way trip.
const lockMargin = time.Second

// lease is a client's lease: kept alive, with the times it was surely
// alive from (the grant's call, then each keep-alive answer).
type lease struct {
	w      *worker
	id     clientv3.LeaseID
	ttl    time.Duration
	sess   *concurrency.Session
	cancel context.CancelFunc
	mu     sync.Mutex
	acks   []int64
}

func newLease(w *worker) (*lease, error) {
	l := &lease{w: w, ttl: time.Duration(w.cfg.lockTTL) * time.Second}
	op := Op{F: "grant", TTL: w.cfg.lockTTL}
	err := w.do(&op, func(ctx context.Context) error {
		resp, err := w.cli.Grant(ctx, w.cfg.lockTTL)
		if err == nil {
			l.id = resp.ID
			op.Lease = int64(resp.ID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	l.acks = []int64{op.Call}
	kctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	ch, err := w.cli.KeepAlive(kctx, l.id)
	if err != nil {
		cancel()
		return nil, err
	}
	go func() {
		for range ch {
			now := time.Now().UnixNano()
			l.mu.Lock()
			l.acks = append(l.acks, now)
			l.mu.Unlock()
		}
	}()
	if l.sess, err = concurrency.NewSession(w.cli, concurrency.WithLease(l.id)); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// validUntil is the end of the part of [from, to] during which the lease
// was surely alive (from itself when none was).
func (l *lease) validUntil(from, to int64) int64 {
	limit := int64(l.ttl - lockMargin)
	l.mu.Lock()
	defer l.mu.Unlock()
	last := int64(-1)
	for _, a := range l.acks {
		if a > to {
			break
		}
		if a > from && last >= 0 && a-last > limit {
			return maxInt64(from, last+limit)
		}
		last = a
	}
	if last < 0 || to-last > limit {
		return maxInt64(from, last+limit)
	}
	return to
}

func maxInt64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

// close stops the keep-alives and revokes the lease (best effort).
func (l *lease) close() {
	l.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), l.w.cfg.timeout)
	defer cancel()
	l.w.cli.Revoke(ctx, l.id)
	if l.sess != nil {
		l.sess.Orphan()
	}
}

// holdOnce takes the lock, works under it and releases it; false when
// something failed or the lease was not surely alive throughout (the
// caller then starts again with a new lease).
func holdOnce(w *worker, l *lease, lkr locker, marker string) bool {
	lk := Op{F: "lock", Lease: int64(l.id), TTL: w.cfg.lockTTL, RPC: lkr.rpc()}
	if err := w.doWithin(w.cfg.lockWait, &lk, func(ctx context.Context) error {
		key, rev, err := lkr.lock(ctx)
		lk.LockKey, lk.Rev = key, rev
		return err
	}); err != nil {
		return false
	}
	ok := true
	mw := Op{F: "marker-write", Key: marker, Value: lk.LockKey}
	ok = w.do(&mw, func(ctx context.Context) error {
		_, err := w.cli.Put(ctx, marker, lk.LockKey)
		return err
	}) == nil && ok
	hr := Op{F: "holder-read", Key: lk.LockKey, Lease: int64(l.id)}
	ok = w.do(&hr, func(ctx context.Context) error {
		resp, err := w.cli.Get(ctx, lk.LockKey)
		if err == nil && len(resp.Kvs) > 0 && resp.Kvs[0].Lease == int64(l.id) {
			hr.Found = true
		}
		return err
	}) == nil && ok
	mr := Op{F: "marker-read", Key: marker}
	ok = w.do(&mr, func(ctx context.Context) error {
		resp, err := w.cli.Get(ctx, marker)
		if err == nil && len(resp.Kvs) > 0 {
			mr.Found, mr.Read = true, string(resp.Kvs[0].Value)
		}
		return err
	}) == nil && ok
	time.Sleep(time.Duration(w.rng.Intn(20)) * time.Millisecond)
	un := Op{F: "unlock", LockKey: lk.LockKey, Lease: int64(l.id), RPC: lkr.rpc()}
	ok = w.do(&un, func(ctx context.Context) error {
		un.ValidNs = l.validUntil(lk.Ret, un.Call)
		return lkr.unlock(ctx, lk.LockKey)
	}) == nil && ok
	return ok && un.ValidNs >= un.Call
}
