package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetmirror/fleetmirror/pkg/agent"
	"github.com/fleetmirror/fleetmirror/pkg/annotations"
)

const (
	// HubIdentity names the ServiceAccount, ClusterRole and
	// ClusterRoleBinding register-cluster creates in a member.
	HubIdentity = "fleetmirror-hub"
	// HubTokenSecret names the long-lived token Secret of HubIdentity.
	HubTokenSecret = HubIdentity + "-token"
	// FieldManager is the server-side apply field manager of the plugin.
	FieldManager = "kubectl-fleetmirror"
	// LabelManagedBy marks the objects register-cluster creates in a
	// member; unregister-cluster deletes only objects carrying it.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "kubectl-fleetmirror"
	// DefaultResourceTypes are the kinds the hub may mirror by default.
	DefaultResourceTypes = "Secret.v1,ConfigMap.v1"
)

// minTokenDuration is the shortest expiration a TokenRequest may ask for.
const minTokenDuration = 10 * time.Minute

// mirrorVerbs are the verbs the hub needs on every mirrored kind (the
// member chart's fleetmirror.mirrorClusterRoles).
var mirrorVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

type registerOptions struct {
	*options
	memberContext   string
	hubContext      string
	hubNamespace    string
	memberNamespace string
	resourceTypes   string
	server          string
	tokenDuration   time.Duration
	tokenTimeout    time.Duration
	tokenSecret     string
	labels          []string
	receiveOnly     bool
}

func (o *options) registerCommand() *cobra.Command {
	r := &registerOptions{options: o}
	cmd := &cobra.Command{
		Use:   "register-cluster NAME --member-context CTX",
		Short: "Give the hub an identity in a member cluster and register the member with the hub",
		Long: `register-cluster creates, in the member cluster of --member-context, the hub's identity: the
ServiceAccount, ClusterRole and ClusterRoleBinding ` + HubIdentity + ` (the rules the member chart's
hubAccess gives: every verb on the --resource-types, namespaces read, events create and patch),
gets a token for it, and writes on the hub (--hub-context, default the current context) the
Secret NAME-fleetmirror labelled fleetmirror.io/cluster-name=NAME whose key "value" holds a
self-contained kubeconfig (server, embedded CA, token). Objects are server-side applied with
field manager ` + FieldManager + `, so running it again updates them. No admin credential
leaves the member.

With --token-secret, the hub's identity already exists in the member (the member chart's
hubAccess creates one): register-cluster writes nothing to the member, reads the token of that
service-account-token Secret in --member-namespace, and writes only the hub's Secret.`,
		Example: `  kubectl fleetmirror register-cluster member-1 --member-context kind-member-1 --hub-context kind-hub
  kubectl fleetmirror register-cluster member-1 --member-context kind-member-1 --token-duration 720h --label env=prod
  kubectl fleetmirror register-cluster member-1 --member-context kind-member-1 --token-secret fleetmirror-member-hub-token`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.register(cmd.Context(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.memberContext, "member-context", "", "Kubeconfig context of the member cluster (required)")
	f.StringVar(&r.hubContext, "hub-context", "", "Kubeconfig context of the hub (default: the current context)")
	f.StringVar(&r.hubNamespace, "hub-namespace", DefaultAgentNamespace, "Namespace of the hub's registration Secrets")
	f.StringVar(&r.memberNamespace, "member-namespace", DefaultAgentNamespace, "Namespace of the hub's ServiceAccount in the member (created if missing)")
	f.StringVar(&r.resourceTypes, "resource-types", DefaultResourceTypes, "Comma-separated kinds the hub may mirror into the member, as Kind.version[.group]")
	f.StringVar(&r.server, "server", "", "API server URL the hub uses to reach the member (default: the member context's server)")
	f.DurationVar(&r.tokenDuration, "token-duration", 0, "0: a long-lived token Secret filled in by the member's token controller; >0: a short-lived token (TokenRequest) expiring after this duration, to be renewed by running register-cluster again")
	f.DurationVar(&r.tokenTimeout, "token-timeout", time.Minute, "How long to wait for the token controller to fill the long-lived token Secret")
	f.StringVar(&r.tokenSecret, "token-secret", "", "Use the token of this existing service-account-token Secret in --member-namespace (the member chart's hubAccess identity, <release>-hub-token) instead of creating the hub's identity; nothing is written to the member")
	f.StringArrayVar(&r.labels, "label", nil, "Extra label KEY=VALUE of the hub's Secret, for target cluster selectors (repeatable)")
	f.BoolVar(&r.receiveOnly, "receive-only", false, "Label the hub's Secret "+annotations.LabelReceiveOnly+"=true: the member only receives mirrors, and the hub looks for no sources, pull mirrors or MirrorPolicies there (for a member without a member agent: it spares the hub two idle watches per kind)")
	_ = cmd.MarkFlagRequired("member-context")
	return cmd
}

func (o *options) unregisterCommand() *cobra.Command {
	r := &registerOptions{options: o}
	cmd := &cobra.Command{
		Use:   "unregister-cluster NAME",
		Short: "Remove a member cluster's registration from the hub, and with --member-context the hub's identity from the member",
		Long: `unregister-cluster deletes the hub's Secrets labelled fleetmirror.io/cluster-name=NAME in
--hub-namespace. With --member-context it also deletes, in the member, the ServiceAccount, token
Secret, ClusterRole and ClusterRoleBinding ` + HubIdentity + ` that register-cluster created: only
those labelled ` + LabelManagedBy + `=` + ManagedByValue + `.`,
		Example: `  kubectl fleetmirror unregister-cluster member-1 --hub-context kind-hub --member-context kind-member-1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return r.unregister(cmd.Context(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&r.memberContext, "member-context", "", "Kubeconfig context of the member cluster; when set, the hub's identity there is deleted too")
	f.StringVar(&r.hubContext, "hub-context", "", "Kubeconfig context of the hub (default: the current context)")
	f.StringVar(&r.hubNamespace, "hub-namespace", DefaultAgentNamespace, "Namespace of the hub's registration Secrets")
	f.StringVar(&r.memberNamespace, "member-namespace", DefaultAgentNamespace, "Namespace of the hub's ServiceAccount in the member")
	return cmd
}

// contextConfig returns the REST config of a named context of the
// kubeconfig of the flags, or of the current context when name is empty.
func (o *options) contextConfig(name string) (*rest.Config, error) {
	loader := o.config.ToRawKubeConfigLoader()
	if name == "" {
		return loader.ClientConfig()
	}
	raw, err := loader.RawConfig()
	if err != nil {
		return nil, err
	}
	if _, ok := raw.Contexts[name]; !ok {
		return nil, fmt.Errorf("kubeconfig has no context %q", name)
	}
	return clientcmd.NewNonInteractiveClientConfig(raw, name, &clientcmd.ConfigOverrides{}, loader.ConfigAccess()).ClientConfig()
}

// ValidateClusterName refuses names the hub would refuse.
func ValidateClusterName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("cluster name %q is invalid: %s", name, strings.Join(errs, "; "))
	}
	return nil
}

// parseLabels parses KEY=VALUE labels of the hub's Secret.
func parseLabels(in []string) (map[string]string, error) {
	out := map[string]string{}
	for _, l := range in {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("--label %q is not KEY=VALUE", l)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, fmt.Errorf("--label %q: %s", l, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, fmt.Errorf("--label %q: %s", l, strings.Join(errs, "; "))
		}
		switch k {
		case annotations.LabelClusterName:
			return nil, fmt.Errorf("--label %q: %s is set from NAME", l, k)
		case annotations.LabelMirror, annotations.LabelManagedBy:
			return nil, fmt.Errorf("--label %q: the hub refuses registration Secrets carrying the mirror label %s", l, k)
		case annotations.LabelReceiveOnly:
			if v != "true" && v != "false" {
				return nil, fmt.Errorf("--label %q: %s is true or false (or use --receive-only)", l, k)
			}
		}
		out[k] = v
	}
	return out, nil
}

// HubRules returns the ClusterRole rules of the hub's identity for the
// given mappings: the member chart's fleetmirror.mirrorClusterRoles.
func HubRules(mappings []*meta.RESTMapping) []*rbacv1ac.PolicyRuleApplyConfiguration {
	byGroup := map[string]map[string]bool{}
	for _, m := range mappings {
		g := m.Resource.Group
		if byGroup[g] == nil {
			byGroup[g] = map[string]bool{}
		}
		byGroup[g][m.Resource.Resource] = true
	}
	groups := make([]string, 0, len(byGroup))
	for g := range byGroup {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	var rules []*rbacv1ac.PolicyRuleApplyConfiguration
	for _, g := range groups {
		resources := make([]string, 0, len(byGroup[g]))
		for r := range byGroup[g] {
			resources = append(resources, r)
		}
		sort.Strings(resources)
		rules = append(rules, rbacv1ac.PolicyRule().WithAPIGroups(g).WithResources(resources...).WithVerbs(mirrorVerbs...))
	}
	return append(rules,
		rbacv1ac.PolicyRule().WithAPIGroups("").WithResources("namespaces").WithVerbs("get", "list", "watch"),
		rbacv1ac.PolicyRule().WithAPIGroups("", "events.k8s.io").WithResources("events").WithVerbs("create", "patch"),
		// The member's MirrorPolicies: read, and the hub's part of their
		// status applied (the charts' fleetmirror.hubPolicyRules).
		rbacv1ac.PolicyRule().WithAPIGroups("fleetmirror.io").WithResources("mirrorpolicies").WithVerbs("get", "list", "watch"),
		rbacv1ac.PolicyRule().WithAPIGroups("fleetmirror.io").WithResources("mirrorpolicies/status").WithVerbs("patch"),
	)
}

// ownedOrAbsent refuses to take over an object someone else created.
func ownedOrAbsent(obj metav1.Object, err error, what string) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if obj.GetLabels()[LabelManagedBy] != ManagedByValue {
		return fmt.Errorf("%s exists and was not created by kubectl-fleetmirror (no label %s=%s); not taking it over", what, LabelManagedBy, ManagedByValue)
	}
	return nil
}

func (r *registerOptions) register(ctx context.Context, name string) error {
	if err := ValidateClusterName(name); err != nil {
		return err
	}
	extra, err := parseLabels(r.labels)
	if err != nil {
		return err
	}
	if r.receiveOnly {
		extra[annotations.LabelReceiveOnly] = "true"
	}
	gvks, err := agent.ParseResourceTypes(r.resourceTypes)
	if err != nil {
		return err
	}
	if len(gvks) == 0 {
		return errors.New("--resource-types: give at least one kind")
	}
	if r.tokenDuration < 0 || (r.tokenDuration > 0 && r.tokenDuration < minTokenDuration) {
		return fmt.Errorf("--token-duration %s: give 0 for a long-lived token, or at least %s (the API server's minimum)", r.tokenDuration, minTokenDuration)
	}
	if r.tokenSecret != "" && r.tokenDuration > 0 {
		return errors.New("--token-secret and --token-duration exclude each other: the Secret's token is long-lived")
	}
	memberCfg, err := r.contextConfig(r.memberContext)
	if err != nil {
		return fmt.Errorf("member context: %w", err)
	}
	hubCfg, err := r.contextConfig(r.hubContext)
	if err != nil {
		return fmt.Errorf("hub context: %w", err)
	}
	server := r.server
	if server == "" {
		server = memberCfg.Host
	}
	ca := memberCfg.CAData
	if len(ca) == 0 && memberCfg.CAFile != "" {
		if ca, err = os.ReadFile(memberCfg.CAFile); err != nil {
			return fmt.Errorf("member context's CA: %w", err)
		}
	}
	if memberCfg.Insecure {
		return errors.New("the member context skips TLS verification; the hub needs the member's CA (certificate-authority-data)")
	}
	member, err := kubernetes.NewForConfig(memberCfg)
	if err != nil {
		return err
	}
	hub, err := kubernetes.NewForConfig(hubCfg)
	if err != nil {
		return err
	}

	// Before anything is written: one registration per name.
	secretName := name + "-fleetmirror"
	sel := labels.SelectorFromSet(labels.Set{annotations.LabelClusterName: name}).String()
	existing, err := hub.CoreV1().Secrets(r.hubNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("hub Secrets: %w", err)
	}
	for _, s := range existing.Items {
		if s.Name != secretName {
			return fmt.Errorf("cluster %s is already registered on the hub by Secret %s/%s (the hub keeps the oldest); delete it first, e.g. with unregister-cluster", name, s.Namespace, s.Name)
		}
	}

	var token string
	if r.tokenSecret != "" {
		token, err = r.existingToken(ctx, member)
	} else {
		token, err = r.createIdentity(ctx, member, gvks)
	}
	if err != nil {
		return err
	}

	kc, err := hubKubeconfig(name, server, ca, token)
	if err != nil {
		return err
	}
	secretLabels := map[string]string{annotations.LabelClusterName: name}
	for k, v := range extra {
		secretLabels[k] = v
	}
	apply := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if _, err := hub.CoreV1().Secrets(r.hubNamespace).Apply(ctx,
		corev1ac.Secret(secretName, r.hubNamespace).WithLabels(secretLabels).WithType(corev1.SecretTypeOpaque).
			WithData(map[string][]byte{"value": kc}), apply); err != nil {
		return fmt.Errorf("hub Secret: %w", err)
	}
	_, _ = fmt.Fprintf(r.streams.Out, "hub: secret %s/%s applied (cluster %s, server %s)\n", r.hubNamespace, secretName, name, server)
	return nil
}

// createIdentity creates the hub's identity in the member (ServiceAccount,
// ClusterRole with every verb on the kinds gvks, binding) and returns its token.
// It refuses to take over objects of those names it did not create.
func (r *registerOptions) createIdentity(ctx context.Context, member kubernetes.Interface, gvks []schema.GroupVersionKind) (string, error) {
	// Kinds to resources by the member's discovery.
	groups, err := restmapper.GetAPIGroupResources(member.Discovery())
	if err != nil {
		return "", fmt.Errorf("member discovery: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	mappings := make([]*meta.RESTMapping, 0, len(gvks))
	for _, gvk := range gvks {
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return "", fmt.Errorf("--resource-types: the member has no kind %s: %w", gvk, err)
		}
		mappings = append(mappings, m)
	}

	out := r.streams.Out
	ns := r.memberNamespace
	if err := ensureNamespace(ctx, member, ns, out); err != nil {
		return "", err
	}
	sa, err := member.CoreV1().ServiceAccounts(ns).Get(ctx, HubIdentity, metav1.GetOptions{})
	if err := ownedOrAbsent(sa, err, "member ServiceAccount "+ns+"/"+HubIdentity); err != nil {
		return "", err
	}
	cr, err := member.RbacV1().ClusterRoles().Get(ctx, HubIdentity, metav1.GetOptions{})
	if err := ownedOrAbsent(cr, err, "member ClusterRole "+HubIdentity); err != nil {
		return "", err
	}
	crb, err := member.RbacV1().ClusterRoleBindings().Get(ctx, HubIdentity, metav1.GetOptions{})
	if err := ownedOrAbsent(crb, err, "member ClusterRoleBinding "+HubIdentity); err != nil {
		return "", err
	}

	ours := map[string]string{LabelManagedBy: ManagedByValue}
	apply := metav1.ApplyOptions{FieldManager: FieldManager, Force: true}
	if _, err := member.CoreV1().ServiceAccounts(ns).Apply(ctx,
		corev1ac.ServiceAccount(HubIdentity, ns).WithLabels(ours).WithAutomountServiceAccountToken(false), apply); err != nil {
		return "", fmt.Errorf("member ServiceAccount: %w", err)
	}
	_, _ = fmt.Fprintf(out, "member: serviceaccount %s/%s applied\n", ns, HubIdentity)
	if _, err := member.RbacV1().ClusterRoles().Apply(ctx,
		rbacv1ac.ClusterRole(HubIdentity).WithLabels(ours).WithRules(HubRules(mappings)...), apply); err != nil {
		return "", fmt.Errorf("member ClusterRole: %w", err)
	}
	_, _ = fmt.Fprintf(out, "member: clusterrole %s applied\n", HubIdentity)
	if _, err := member.RbacV1().ClusterRoleBindings().Apply(ctx,
		rbacv1ac.ClusterRoleBinding(HubIdentity).WithLabels(ours).
			WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup("rbac.authorization.k8s.io").WithKind("ClusterRole").WithName(HubIdentity)).
			WithSubjects(rbacv1ac.Subject().WithKind("ServiceAccount").WithName(HubIdentity).WithNamespace(ns)), apply); err != nil {
		return "", fmt.Errorf("member ClusterRoleBinding: %w", err)
	}
	_, _ = fmt.Fprintf(out, "member: clusterrolebinding %s applied\n", HubIdentity)

	return r.token(ctx, member, ours, apply)
}

// existingToken returns the token of --token-secret, an existing
// service-account-token Secret in the member, waiting up to --token-timeout
// for the member's token controller to fill it. It writes nothing.
func (r *registerOptions) existingToken(ctx context.Context, member kubernetes.Interface) (string, error) {
	ns, name := r.memberNamespace, r.tokenSecret
	var token string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, r.tokenTimeout, true, func(ctx context.Context) (bool, error) {
		s, err := member.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if s.Type != corev1.SecretTypeServiceAccountToken {
			return false, fmt.Errorf("member Secret %s/%s has type %s, not %s", ns, name, s.Type, corev1.SecretTypeServiceAccountToken)
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("--token-secret %s/%s: %w", ns, name, err)
	}
	_, _ = fmt.Fprintf(r.streams.Out, "member: token of secret %s/%s read\n", ns, name)
	return token, nil
}

func ensureNamespace(ctx context.Context, c kubernetes.Interface, ns string, out io.Writer) error {
	_, err := c.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return err
	}
	_, err = c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{FieldManager: FieldManager})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("member namespace: %w", err)
	}
	_, _ = fmt.Fprintf(out, "member: namespace %s created\n", ns)
	return nil
}

// token returns a token of the hub's ServiceAccount: short-lived from the
// TokenRequest API with --token-duration, else the long-lived token the
// member's token controller writes into a service-account-token Secret.
func (r *registerOptions) token(ctx context.Context, member kubernetes.Interface, ours map[string]string, apply metav1.ApplyOptions) (string, error) {
	ns, out := r.memberNamespace, r.streams.Out
	if r.tokenDuration > 0 {
		secs := int64(r.tokenDuration / time.Second)
		tr, err := member.CoreV1().ServiceAccounts(ns).CreateToken(ctx, HubIdentity,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
		if err != nil {
			return "", fmt.Errorf("member token request: %w", err)
		}
		_, _ = fmt.Fprintf(out, "member: token of serviceaccount %s/%s requested, expires %s\n", ns, HubIdentity, tr.Status.ExpirationTimestamp.UTC().Format(time.RFC3339))
		return tr.Status.Token, nil
	}
	s, err := member.CoreV1().Secrets(ns).Get(ctx, HubTokenSecret, metav1.GetOptions{})
	if err := ownedOrAbsent(s, err, "member Secret "+ns+"/"+HubTokenSecret); err != nil {
		return "", err
	}
	if _, err := member.CoreV1().Secrets(ns).Apply(ctx,
		corev1ac.Secret(HubTokenSecret, ns).WithLabels(ours).WithType(corev1.SecretTypeServiceAccountToken).
			WithAnnotations(map[string]string{corev1.ServiceAccountNameKey: HubIdentity}), apply); err != nil {
		return "", fmt.Errorf("member token Secret: %w", err)
	}
	_, _ = fmt.Fprintf(out, "member: secret %s/%s applied\n", ns, HubTokenSecret)
	var token string
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, r.tokenTimeout, true, func(ctx context.Context) (bool, error) {
		s, err := member.CoreV1().Secrets(ns).Get(ctx, HubTokenSecret, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		return token != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("the member's token controller did not fill Secret %s/%s within %s (is kube-controller-manager running?); use --token-duration for a short-lived token: %w", ns, HubTokenSecret, r.tokenTimeout, err)
	}
	return token, nil
}

// hubKubeconfig is the self-contained kubeconfig the hub accepts.
func hubKubeconfig(name, server string, ca []byte, token string) ([]byte, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	kc.AuthInfos[HubIdentity] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: HubIdentity}
	kc.CurrentContext = name
	return clientcmd.Write(*kc)
}

func (r *registerOptions) unregister(ctx context.Context, name string) error {
	if err := ValidateClusterName(name); err != nil {
		return err
	}
	hubCfg, err := r.contextConfig(r.hubContext)
	if err != nil {
		return fmt.Errorf("hub context: %w", err)
	}
	hub, err := kubernetes.NewForConfig(hubCfg)
	if err != nil {
		return err
	}
	var member kubernetes.Interface
	if r.memberContext != "" {
		memberCfg, err := r.contextConfig(r.memberContext)
		if err != nil {
			return fmt.Errorf("member context: %w", err)
		}
		if member, err = kubernetes.NewForConfig(memberCfg); err != nil {
			return err
		}
	}
	out := r.streams.Out
	sel := labels.SelectorFromSet(labels.Set{annotations.LabelClusterName: name}).String()
	list, err := hub.CoreV1().Secrets(r.hubNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("hub Secrets: %w", err)
	}
	if len(list.Items) == 0 {
		_, _ = fmt.Fprintf(out, "hub: no secret labelled %s in %s\n", sel, r.hubNamespace)
	}
	for _, s := range list.Items {
		if err := hub.CoreV1().Secrets(s.Namespace).Delete(ctx, s.Name, deleteUID(s.UID)); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("hub Secret %s/%s: %w", s.Namespace, s.Name, err)
		}
		_, _ = fmt.Fprintf(out, "hub: secret %s/%s deleted\n", s.Namespace, s.Name)
	}
	if member == nil {
		return nil
	}
	ns := r.memberNamespace
	type object struct {
		what string
		get  func() (metav1.Object, error)
		del  func(types.UID) error
	}
	objects := []object{
		{"clusterrolebinding " + HubIdentity,
			func() (metav1.Object, error) {
				return member.RbacV1().ClusterRoleBindings().Get(ctx, HubIdentity, metav1.GetOptions{})
			},
			func(uid types.UID) error {
				return member.RbacV1().ClusterRoleBindings().Delete(ctx, HubIdentity, deleteUID(uid))
			}},
		{"clusterrole " + HubIdentity,
			func() (metav1.Object, error) {
				return member.RbacV1().ClusterRoles().Get(ctx, HubIdentity, metav1.GetOptions{})
			},
			func(uid types.UID) error {
				return member.RbacV1().ClusterRoles().Delete(ctx, HubIdentity, deleteUID(uid))
			}},
		{"secret " + ns + "/" + HubTokenSecret,
			func() (metav1.Object, error) {
				return member.CoreV1().Secrets(ns).Get(ctx, HubTokenSecret, metav1.GetOptions{})
			},
			func(uid types.UID) error {
				return member.CoreV1().Secrets(ns).Delete(ctx, HubTokenSecret, deleteUID(uid))
			}},
		{"serviceaccount " + ns + "/" + HubIdentity,
			func() (metav1.Object, error) {
				return member.CoreV1().ServiceAccounts(ns).Get(ctx, HubIdentity, metav1.GetOptions{})
			},
			func(uid types.UID) error {
				return member.CoreV1().ServiceAccounts(ns).Delete(ctx, HubIdentity, deleteUID(uid))
			}},
	}
	for _, o := range objects {
		obj, err := o.get()
		switch {
		case apierrors.IsNotFound(err):
			_, _ = fmt.Fprintf(out, "member: %s not found\n", o.what)
			continue
		case err != nil:
			return fmt.Errorf("member %s: %w", o.what, err)
		case obj.GetLabels()[LabelManagedBy] != ManagedByValue:
			_, _ = fmt.Fprintf(out, "member: %s kept: not created by kubectl-fleetmirror (no label %s=%s)\n", o.what, LabelManagedBy, ManagedByValue)
			continue
		}
		if err := o.del(obj.GetUID()); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("member %s: %w", o.what, err)
		}
		_, _ = fmt.Fprintf(out, "member: %s deleted\n", o.what)
	}
	return nil
}

// deleteUID deletes exactly the object read, not one recreated since.
func deleteUID(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}
