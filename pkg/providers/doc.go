// Package providers holds the sources of clusters the fleet engages:
// Local (the agent's own cluster), KubeconfigSecrets (kubeconfig Secrets
// in the hub's cluster, in Cluster API's convention or with our label) and
// KubeconfigDir (one kubeconfig file per cluster in a directory). Each
// implements fleet.Provider; the fleet does everything else.
package providers
