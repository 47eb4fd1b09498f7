package engine

import (
	"context"

	"github.com/baton-streams/baton/internal/topics"
)

// prepareTopics makes the topics ready (internal/topics) and keeps the
// partition counts the cluster listed.
func (a *App) prepareTopics(ctx context.Context) error {
	need := topics.Need{Brokers: a.cfg.Brokers, Subtopologies: a.top.Subtopologies(), Sources: a.sourceTopics(), SinkConfigs: a.cfg.SinkConfigs}
	if a.cfg.ReplicationSet {
		need.ReplicationFactor = a.cfg.ReplicationFactor
	}
	if a.cfg.MinISRSet {
		need.MinInSyncReplicas = a.cfg.MinISR
	}
	parts, err := topics.Prepare(ctx, a.admin, need, a.log)
	if err != nil {
		return err
	}
	a.partsMu.Lock()
	for t, n := range parts {
		a.topicParts[t] = n
	}
	a.partsMu.Unlock()
	return nil
}
