"""The `existing` provider checks reachability and rights with the cluster's own access reviews."""

from __future__ import annotations

import pytest

from sregym.cluster.agent_access import create_agent_access, revoke_agent_access
from sregym.cluster.agent_proxy import AgentApiProxy
from sregym.cluster.providers import ExistingCluster
from sregym.core.errors import ClusterError

pytestmark = pytest.mark.cluster


def test_admin_kubeconfig_has_every_right_sregym_needs(cluster):
    handle = ExistingCluster(cluster.kubeconfig, cluster.context).up()
    assert handle.provider == "existing"
    assert handle.kube.server_version().startswith("v1.")


def test_a_limited_identity_is_told_exactly_which_rights_are_missing(cluster, namespace, tmp_path):
    try:
        # the agent's identity, as it reaches the API: through its proxy
        with AgentApiProxy(cluster.kube, namespace) as proxy, pytest.raises(ClusterError) as err:
            ExistingCluster(create_agent_access(cluster.kube, namespace, tmp_path, proxy=proxy)).up()
        message = str(err.value)
        assert "lacks rights sregym needs" in message
        assert "create namespaces" in message and "create rbac.authorization.k8s.io/clusterroles" in message
    finally:
        revoke_agent_access(cluster.kube, namespace, kubeconfig=tmp_path / "agent.kubeconfig")


def test_an_unreachable_api_is_one_clear_error(tmp_path):
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                   "users: [{name: u, user: {token: x}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n"
                   "current-context: x\n")
    with pytest.raises(ClusterError, match="not reachable"):
        ExistingCluster(bad).up()
