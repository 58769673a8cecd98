package main

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/clientv3"
)

// runRegister is the register workload: each client picks one of the
// keys at random and reads it (linearizable Range, or serializable with
// probability -serializable), writes it (Put of a value no one else
// writes), or compare-and-sets it (a Txn: if the value is the one this
// client last saw there, put a new value, else read the current value).
// After the run each key is read once more through any member that
// answers (the final reads the lost-write count rests on).
func runRegister(ctx context.Context, cfg *config, rec *recorder) {
	keys := workloadKeys(cfg, "r")
	runWorkers(ctx, cfg, rec, func(ctx context.Context, w *worker) { registerClient(ctx, w, keys) })
	for _, key := range keys {
		finalRead(cfg, rec, func(ctx context.Context, cli *clientv3.Client, op *Op) error {
			op.Key = key
			resp, err := cli.Get(ctx, key)
			if err == nil {
				op.Rev = resp.Header.Revision
				if len(resp.Kvs) > 0 {
					op.Found, op.Read = true, string(resp.Kvs[0].Value)
				}
			}
			return err
		})
	}
}

func registerClient(ctx context.Context, w *worker, keys []string) {
	seen := map[string]string{} // the value this client last saw under each key
	for seq := 0; ctx.Err() == nil; seq++ {
		key := keys[w.rng.Intn(len(keys))]
		op := Op{Key: key}
		r := w.rng.Float64()
		expect, known := seen[key]
		switch {
		case r < 0.4 || (r >= 0.7 && !known):
			op.F = "read"
			op.Serializable = w.rng.Float64() < w.cfg.serializable
		case r < 0.7:
			op.F = "write"
			op.Value = fmt.Sprintf("c%d-%d", w.id, seq)
		default:
			op.F = "cas"
			op.Expect = expect
			op.Value = fmt.Sprintf("c%d-%d", w.id, seq)
		}
		w.do(&op, func(ctx context.Context) error {
			switch op.F {
			case "read":
				var opts []clientv3.OpOption
				if op.Serializable {
					opts = append(opts, clientv3.WithSerializable())
				}
				resp, err := w.cli.Get(ctx, key, opts...)
				if err == nil {
					op.Rev = resp.Header.Revision
					if len(resp.Kvs) > 0 {
						op.Found, op.Read = true, string(resp.Kvs[0].Value)
					}
				}
				return err
			case "write":
				resp, err := w.cli.Put(ctx, key, op.Value)
				if err == nil {
					op.Rev = resp.Header.Revision
				}
				return err
			}
			resp, err := w.cli.Txn(ctx).
				If(clientv3.Compare(clientv3.Value(key), "=", expect)).
				Then(clientv3.OpPut(key, op.Value)).
				Else(clientv3.OpGet(key)).
				Commit()
			if err == nil {
				op.Rev = resp.Header.Revision
				op.Succeeded = resp.Succeeded
				if !resp.Succeeded && len(resp.Responses) == 1 {
					if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
						op.Found, op.Read = true, string(rr.Kvs[0].Value)
					}
				}
			}
			return err
		})
		switch {
		case op.Type == typeInfo:
			delete(seen, key)
		case op.Type != typeOK:
		case op.F == "write" || (op.F == "cas" && op.Succeeded):
			seen[key] = op.Value
		case op.Found:
			seen[key] = op.Read
		default:
			delete(seen, key)
		}
	}
}
