"""Command lines of the offline image builder and of the runtimes images are loaded into."""

from pathlib import Path

from sregym.cluster.imagebuild import podman, runtime


def test_references_are_qualified_for_containerd():
    assert podman.qualified("sregym/base:bookworm") == "docker.io/sregym/base:bookworm"
    assert podman.qualified("localhost/x:1") == "localhost/x:1"
    assert podman.qualified("registry.example:5000/x:1") == "registry.example:5000/x:1"


def test_build_command_uses_host_network_and_the_vm_ulimits():
    cmd = podman.build_command(Path("/ctx"), ("sregym/web:abc", "sregym/web:latest"))
    assert cmd[:4] == ["podman", "build", "--network", "host"]
    assert "nofile=20000:20000" in cmd and "nproc=4096:4096" in cmd
    assert cmd[-3:] == ["-f", "/ctx/Dockerfile", "/ctx"]
    assert "docker.io/sregym/web:abc" in cmd and "docker.io/sregym/web:latest" in cmd


def test_save_writes_one_docker_archive_with_every_tag():
    cmd = podman.save_command(Path("/c/x.tar"), ("sregym/web:abc", "sregym/web:latest"))
    assert cmd == ["podman", "save", "-m", "--format", "docker-archive", "-o", "/c/x.tar",
                   "docker.io/sregym/web:abc", "docker.io/sregym/web:latest"]


def test_debootstrap_is_minbase_with_the_listed_packages():
    cmd = podman.debootstrap_command(Path("/r"), "bookworm", ["python3", "curl"], "http://m/debian")
    assert cmd == ["debootstrap", "--variant=minbase", "--include=python3,curl", "bookworm", "/r", "http://m/debian"]


def test_apt_mirror_reads_deb822_sources(tmp_path):
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d/debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.test/debian\nSuites: bookworm bookworm-updates\n\n"
        "Types: deb\nURIs: http://mirror.test/debian-security\nSuites: bookworm-security\n")
    assert podman.apt_mirror(tmp_path) == "http://mirror.test/debian"


def test_apt_mirror_reads_one_line_sources(tmp_path):
    (tmp_path / "sources.list").write_text("# c\ndeb http://one.test/debian/ bookworm main\n")
    assert podman.apt_mirror(tmp_path) == "http://one.test/debian"


def test_ctr_import_targets_the_clusters_socket_and_k8s_namespace():
    cmd = runtime.ctr_import_command(Path("/s/containerd.sock"), Path("/c/x.tar"))
    assert cmd == ["ctr", "-a", "/s/containerd.sock", "-n", "k8s.io", "images", "import", "/c/x.tar"]


def test_kind_load_names_the_cluster():
    assert runtime.kind_load_command("bench", Path("/c/x.tar")) == [
        "kind", "load", "image-archive", "/c/x.tar", "--name", "bench"]


def test_host_trust_files_are_lent_read_only_to_run_steps():
    cmd = podman.build_command(Path("/ctx"), ("sregym/web:abc",), (Path("/etc/pip.conf"),))
    assert cmd[cmd.index("--volume") + 1] == "/etc/pip.conf:/etc/pip.conf:ro"


def test_base_import_sets_a_path_so_commands_resolve_by_name():
    cmd = podman.import_command(("sregym/base:abc", "sregym/base:bookworm"))
    assert f"ENV PATH={podman.DEFAULT_PATH}" in cmd and cmd[-1] == "docker.io/sregym/base:abc"


def test_a_new_build_keeps_the_newest_archives_and_drops_the_older_with_their_tags(tmp_path, monkeypatch):
    """suite-runner ships the repository, so every commit is a new 0.8 GB archive: the cache keeps
    the one just built and the two newest others, never the one it is keeping."""
    import os

    from sregym.cluster import images

    untagged = []
    monkeypatch.setattr(podman, "untag", untagged.append)
    archives = []
    for age, digest in enumerate(["a" * 64, "b" * 64, "c" * 64, "d" * 64, "e" * 64]):
        tar = tmp_path / f"{digest}.tar"
        for path in (tar, tar.with_suffix(".json"), tar.with_suffix(".log")):
            path.write_text(digest)
            os.utime(path, (1000 - age, 1000 - age))  # "a" newest, "e" oldest
        archives.append(tar)
    keep = archives[-1]  # the one just built may even be the oldest on disk (a restored cache)
    removed = images.prune_archives(keep, "sregym/suite-runner", kept=3)
    assert sorted(p.name for p in tmp_path.glob("*.tar")) == sorted(p.name for p in [archives[0], archives[1], keep])
    assert set(removed) == {archives[2], archives[3]}
    assert not list(tmp_path.glob(("c" * 64) + ".*")) and not list(tmp_path.glob(("d" * 64) + ".*"))
    assert sorted(untagged) == ["sregym/suite-runner:cccccccccccc", "sregym/suite-runner:dddddddddddd"]
