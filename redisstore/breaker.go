package redisstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/srjn45/rdq"
	"github.com/srjn45/rdq/store"
)

var _ store.HandlerPauser = (*Store)(nil)

func validPair(queue, handler string) error {
	if err := rdq.ValidateName("queue", queue); err != nil {
		return err
	}
	return rdq.ValidateName("handler", handler)
}

func pairFilter(queue, handler string) (string, error) {
	b, err := json.Marshal(map[string]string{"queue": queue, "handler": handler})
	return string(b), err
}

// PauseHandler implements store.HandlerPauser: one script checks the
// pause (and the probe), writes the audit entry, and holds the handler's
// waiting tasks out of the set claims of every handler read.
func (s *Store) PauseHandler(ctx context.Context, p store.PauseHandlerParams) (bool, error) {
	if err := validPair(p.Queue, p.Handler); err != nil {
		return false, fmt.Errorf("redisstore: pause handler: %w", err)
	}
	filter, err := pairFilter(p.Queue, p.Handler)
	if err != nil {
		return false, fmt.Errorf("redisstore: pause handler: %w", err)
	}
	coolOff, auditCool := "0", "until resumed"
	if p.CoolOff > 0 {
		coolOff, auditCool = micros(p.CoolOff), p.CoolOff.String()
	}
	auditRatio := ""
	if p.Ratio > 0 {
		auditRatio = strconv.FormatFloat(p.Ratio, 'f', 3, 64)
	}
	pid, ptoken := "", int64(0)
	if p.Probe != nil {
		pid, ptoken = p.Probe.ID.String(), p.Probe.Token
	}
	if err := s.addQueues(ctx, p.Queue); err != nil {
		return false, fmt.Errorf("redisstore: pause handler %s/%s: %w", p.Queue, p.Handler, err)
	}
	res, err := s.runAudited(ctx, scriptPauseHandler, p.Queue, nowArg(p.Now), p.Queue, p.Handler, coolOff, flag(p.Probe != nil), pid, ptoken,
		p.Actor, p.Reason, cut(p.Fingerprint), strconv.FormatFloat(p.Ratio, 'g', -1, 64), auditRatio, auditCool, filter)
	if err != nil {
		return false, fmt.Errorf("redisstore: pause handler %s/%s: %w", p.Queue, p.Handler, err)
	}
	return res == int64(1), nil
}

// ResumeHandler implements store.HandlerPauser, and notifies the queue's
// workers.
func (s *Store) ResumeHandler(ctx context.Context, p store.ResumeHandlerParams) (bool, error) {
	if err := validPair(p.Queue, p.Handler); err != nil {
		return false, fmt.Errorf("redisstore: resume handler: %w", err)
	}
	filter, err := pairFilter(p.Queue, p.Handler)
	if err != nil {
		return false, fmt.Errorf("redisstore: resume handler: %w", err)
	}
	pid, ptoken := "", int64(0)
	if p.Probe != nil {
		pid, ptoken = p.Probe.ID.String(), p.Probe.Token
	}
	res, err := s.runAudited(ctx, scriptResumeHandler, p.Queue, nowArg(p.Now), p.Queue, p.Handler, flag(p.Probe != nil), pid, ptoken, p.Actor, p.Reason, filter)
	if err != nil {
		return false, fmt.Errorf("redisstore: resume handler %s/%s: %w", p.Queue, p.Handler, err)
	}
	return res == int64(1), nil
}

// ClaimProbe implements store.HandlerPauser. The probe is the due waiting
// task with the fewest attempts among the handler's first 1,000 due.
func (s *Store) ClaimProbe(ctx context.Context, p store.ProbeParams) ([]store.Probe, error) {
	if len(p.Queues) == 0 {
		return nil, fmt.Errorf("%w: redisstore: claim probe needs at least one queue", rdq.ErrInvalid)
	}
	if p.Lease <= 0 {
		return nil, fmt.Errorf("%w: redisstore: claim probe: lease %s, want a positive duration", rdq.ErrInvalid, p.Lease)
	}
	var qs []string
	pos := map[string]int{}
	for _, q := range p.Queues {
		if _, ok := pos[q]; !ok {
			pos[q] = len(qs)
			qs = append(qs, q)
		}
	}
	per := make([][]store.Probe, len(qs))
	err := parallel(ctx, qs, func(ctx context.Context, q string) error {
		args := []any{nowArg(p.Now), micros(p.Lease), p.WorkerID, 1, q, len(p.Handlers)}
		for _, h := range p.Handlers {
			args = append(args, h)
		}
		res, err := s.runQ(ctx, scriptClaimProbe, q, args...)
		if err != nil {
			return err
		}
		rows, _ := res.([]any)
		for _, r := range rows {
			v, _ := r.([]any)
			if len(v) != 4 {
				return fmt.Errorf("malformed reply")
			}
			fields, _ := v[0].([]any)
			t, err := decodeTask(fields)
			if err != nil {
				return err
			}
			pf, _ := v[1].([]any)
			hp, err := decodePause(str(v[2]), str(v[3]), pf)
			if err != nil {
				return err
			}
			per[pos[q]] = append(per[pos[q]], store.Probe{Task: t, Pause: hp})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: claim probe: %w", err)
	}
	out := []store.Probe{}
	for _, ps := range per {
		out = append(out, ps...)
	}
	return out, nil
}

// PausedHandlers implements store.HandlerPauser: with no queue, one
// script per queue.
func (s *Store) PausedHandlers(ctx context.Context, queue string) ([]store.HandlerPause, error) {
	qs := []string{queue}
	if queue == "" {
		var err error
		if qs, err = s.allQueues(ctx); err != nil {
			return nil, fmt.Errorf("redisstore: paused handlers: %w", err)
		}
	}
	var mu sync.Mutex
	out := []store.HandlerPause{}
	err := parallel(ctx, qs, func(ctx context.Context, q string) error {
		res, err := s.runQ(ctx, scriptPausedHandlers, q)
		if err != nil {
			return err
		}
		rows, _ := res.([]any)
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rows {
			v, _ := r.([]any)
			if len(v) != 3 {
				return fmt.Errorf("malformed reply")
			}
			fields, _ := v[2].([]any)
			if len(fields) == 0 {
				continue
			}
			hp, err := decodePause(str(v[0]), str(v[1]), fields)
			if err != nil {
				return err
			}
			out = append(out, hp)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: paused handlers: %w", err)
	}
	slices.SortFunc(out, func(a, b store.HandlerPause) int {
		return cmp.Or(strings.Compare(a.Queue, b.Queue), strings.Compare(a.Handler, b.Handler))
	})
	return out, nil
}

// decodePause reads a pause's hash (see scriptPauseHandler).
func decodePause(queue, handler string, fields []any) (store.HandlerPause, error) {
	f := map[string]string{}
	for i := 0; i+1 < len(fields); i += 2 {
		f[str(fields[i])] = str(fields[i+1])
	}
	hp := store.HandlerPause{Queue: queue, Handler: handler, State: store.HandlerState(f["state"]),
		Since: microTime(f["since"]), ProbeAt: microTime(f["probeat"]), Trips: atoi(f["trips"]),
		Actor: f["actor"], Reason: f["reason"], Fingerprint: f["fp"]}
	hp.Ratio, _ = strconv.ParseFloat(f["ratio"], 64)
	if f["pid"] != "" {
		id, err := rdq.ParseID(f["pid"])
		if err != nil {
			return hp, fmt.Errorf("pause of %s/%s: probe: %w", queue, handler, err)
		}
		token, _ := strconv.ParseInt(f["ptoken"], 10, 64)
		hp.Probe = store.Lease{ID: id, Token: token}
	}
	return hp, nil
}
