package baton

import (
	"context"

	"github.com/baton-streams/baton/internal/topics"
)

// prepareTopics makes the topics ready (internal/topics) and keeps the
// partition counts the cluster listed.
func (a *App) prepareTopics(ctx context.Context) error {
	need := topics.Need{Brokers: a.cfg.brokers, Subtopologies: a.top.Subtopologies(), Sources: a.sourceTopics(), SinkConfigs: a.cfg.sinkConfigs}
	if a.cfg.replicationSet {
		need.ReplicationFactor = a.cfg.replicationFactor
	}
	if a.cfg.minISRSet {
		need.MinInSyncReplicas = a.cfg.minISR
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
