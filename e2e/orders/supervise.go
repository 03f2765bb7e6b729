package orders

import (
	"context"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/functions/retryworker"
	"github.com/stratamq/strata/pkg/retry"
)

// Supervise runs fn until ctx ends, starting it again a second after it
// returns an error, as a process supervisor restarts a crashed service;
// each restart is logged as "restarting" with the error. It returns nil
// when ctx ends, or fn's error when it fails more than max times in a row
// without running a minute in between (max 0: never give up).
func Supervise(ctx context.Context, name string, log *slog.Logger, max int, fn func(context.Context) error) error {
	fails := 0
	for ctx.Err() == nil {
		began := time.Now()
		err := fn(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			err = context.Canceled // fn stopped on its own: restart it too
		}
		if time.Since(began) > time.Minute {
			fails = 0
		}
		if fails++; max > 0 && fails > max {
			return err
		}
		log.Warn(name+": restarting", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return nil
}

// RunRetryWorker runs the retry worker (functions/retryworker) over
// orders.retry until ctx ends: records are redelivered to their origin
// partition of orders when due, for billing to try again.
func RunRetryWorker(ctx context.Context, seeds []string, p retry.Policy, timing GroupTiming) error {
	cfg := retryworker.DefaultConfig()
	cfg.Bootstrap, cfg.Topics, cfg.Group, cfg.Policy = seeds, []string{retry.RetryTopic(Topic)}, GroupRetry, p
	w, err := retryworker.New(cfg, nil, append([]kgo.Opt{kgo.ClientID("orders-retryworker")}, timing.opts()...)...)
	if err != nil {
		return err
	}
	defer w.Close()
	_, err = w.Run(ctx)
	return err
}
