// Package providers holds the sources of the hub's other clusters:
// KubeconfigSecrets (kubeconfig Secrets in the hub's cluster, in Cluster
// API's convention or with our label) and KubeconfigDir (one kubeconfig
// file per cluster in a directory). Each implements fleet.Provider; the
// fleet does everything else. The agent's own cluster is fleet.Local.
package providers
