package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/baton-streams/baton/cluster"
)

var clusterCmd = &cobra.Command{
	Use:   "cluster [--listen 127.0.0.1:9092] [--brokers 1]",
	Short: "Run an embedded Kafka-compatible cluster until SIGINT/SIGTERM",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		listen, _ := cmd.Flags().GetString("listen")
		brokers, _ := cmd.Flags().GetInt("brokers")
		c, err := cluster.Start(listen, brokers)
		if err != nil {
			return usageErr(err)
		}
		defer c.Close()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
		fmt.Printf("cluster ready: %s\n", strings.Join(c.Addrs(), ","))
		<-sig
		return nil
	},
}

func init() {
	clusterCmd.Flags().String("listen", "127.0.0.1:9092", "address of the first broker (host:port)")
	clusterCmd.Flags().Int("brokers", 1, "number of brokers")
	rootCmd.AddCommand(clusterCmd)
}
