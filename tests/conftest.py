from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ENVHUB = shutil.which("envhub", path=str(Path(sys.executable).parent)) or "envhub"


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the user's home: envhub's directories live in a temporary one."""
    home = tmp_path_factory.mktemp("envhub-home")
    monkeypatch.setenv("ENVHUB_HOME", str(home / "home"))
    monkeypatch.setenv("ENVHUB_CACHE", str(home / "cache"))
    monkeypatch.delenv("ENVHUB_DEBUG", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def envhub_cli(capsys: pytest.CaptureFixture[str]):
    """Run the CLI in-process through its real error boundary, ``envhub.cli.main``."""
    from envhub.cli import main

    def run(*args: str) -> Result:
        capsys.readouterr()
        with pytest.raises(SystemExit) as exc:
            main(list(args))
        captured = capsys.readouterr()
        return Result(int(exc.value.code or 0), captured.out, captured.err)

    return run


def run_envhub(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    """Run the installed ``envhub`` command in a subprocess, as a user would."""
    proc = subprocess.run([ENVHUB, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)
    return Result(proc.returncode, proc.stdout, proc.stderr)


# --- registries: a directory, memory:// and s3:// on a real (moto) server on 127.0.0.1 ---------

S3_BUCKET = "envhub-test"


@pytest.fixture(scope="session")
def s3_endpoint():
    """A moto S3 server on 127.0.0.1 (a free port), with dummy credentials and one bucket.

    Started once per session, and only by tests that use s3://."""
    import logging

    pytest.importorskip("s3fs")
    moto_server = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log on the tests' stderr
    with pytest.MonkeyPatch.context() as mp:
        for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_SESSION_TOKEN": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                           "AWS_EC2_METADATA_DISABLED": "true"}.items():
            mp.setenv(key, value)
        for key in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(key, raising=False)
        server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        try:
            host, port = server.get_host_and_port()
            endpoint = f"http://{host}:{port}"
            import boto3

            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=S3_BUCKET)
            yield endpoint
        finally:
            server.stop()


@dataclass
class RegistryTarget:
    """Where a test's registry lives: its URL and the storage options fsspec needs."""

    kind: str
    url: str
    storage_options: dict[str, object]

    #: Equivalent options that make fsspec create another filesystem instance (s3fs caches
    #: listings per instance), to act as a second, independent client.
    other_storage_options: dict[str, object] | None = None

    def open(self, *, other_client: bool = False):  # type: ignore[no-untyped-def]
        from envhub.registry import FsspecRegistry

        options = self.other_storage_options if other_client and self.other_storage_options else self.storage_options
        return FsspecRegistry(self.url, storage_options=options)


@pytest.fixture(params=["dir", "memory", "s3"])
def registry_target(request: pytest.FixtureRequest, tmp_path: Path) -> RegistryTarget:
    """An empty registry of each kind, unique to the test."""
    import uuid

    unique = uuid.uuid4().hex
    if request.param == "dir":
        return RegistryTarget("dir", str(tmp_path / "registry"), {})
    if request.param == "memory":
        return RegistryTarget("memory", f"memory://envhub-test-{unique}", {})
    endpoint = request.getfixturevalue("s3_endpoint")
    return RegistryTarget("s3", f"s3://{S3_BUCKET}/{unique}", {"client_kwargs": {"endpoint_url": endpoint}},
                          {"endpoint_url": endpoint, "key": "testing", "secret": "testing"})


@pytest.fixture
def s3_cli(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Point fsspec's s3 configuration at the moto server, for commands given only a URL.

    fsspec reads ``FSSPEC_S3_<KWARG>`` when it is imported (fsspec.config.set_conf_env): the
    returned variables serve subprocesses; in this process the parsed config is patched."""
    import fsspec.config

    env = {"FSSPEC_S3_ENDPOINT_URL": s3_endpoint, "FSSPEC_S3_KEY": "testing", "FSSPEC_S3_SECRET": "testing"}
    conf: dict[str, dict[str, object]] = {}
    fsspec.config.set_conf_env(conf, env)
    monkeypatch.setitem(fsspec.config.conf, "s3", conf["s3"])
    return env


# --- an OpenAI-compatible chat-completions server on 127.0.0.1 (tests/openai_server.py) ---------


@pytest.fixture
def openai_server():  # type: ignore[no-untyped-def]
    """A running OpenAI-compatible server answering "" until a test sets ``server.script``;
    ``server.base_url`` ends in ``/v1`` and ``server.requests`` records what was sent."""
    from tests.openai_server import OpenAIServer

    with OpenAIServer() as server:
        yield server


# --- the fast lane: `python3 dev.py test --fast` runs `-m "not slow"` (docs/development.md) -----

#: The slow tests, all of them, in this one table rather than as markers in the test files.
#: An entry is ``module::test`` (every parametrization of the test) or ``module::test[id]``
#: (one case); a bare ``module`` would mark a whole module, which the fast lane avoids: every
#: test module keeps its quick tests there. Each of these took more than 0.8 s, or 0.6 s over all
#: its cases (the figures: one run of the whole suite on a 2-core machine, all cases added up):
#: they run envhub or pip in subprocesses, build bundles, venvs or wheels, start servers, or
#: generate datasets. Add a test here when it takes more than about a second.
SLOW: tuple[str, ...] = (
    # test_import_openenv.py: openenv init, and each process importing openenv-core (~6 s)
    "test_import_openenv.py::test_an_openenv_init_environment_imports_validates_and_evaluates",
    "test_import_openenv.py::test_seeds_reach_reset_and_the_environment_ends_the_episode",
    # test_serve_workers.py, test_serve_ors_root.py: real envhub serve processes, workers killed and restarted
    "test_serve_workers.py",
    "test_serve_ors_root.py::test_a_clash_with_envhubs_routes_refuses_to_start",
    # test_serve_ors_sdk.py: real envhub serve processes (one with a short idle timeout) for the SDK's client
    "test_serve_ors_sdk.py",
    # test_ray_executor.py: a real Ray cluster (a head and two worker nodes) started, drained and stopped
    "test_ray_executor.py::test_same_records_as_the_local_executor",
    "test_ray_executor.py::test_resume_plays_only_the_missing_rollouts",
    "test_ray_executor.py::test_actors_run_on_both_worker_nodes_and_end_with_the_run",
    "test_ray_executor.py::test_a_killed_worker_node_has_its_episodes_rerun_and_no_record_written_twice",
    "test_ray_executor.py::test_when_every_actor_dies_the_run_stops_and_resumes_to_exactly_one_record_each",
    "test_ray_executor.py::test_an_actor_that_cannot_load_the_policy_ends_the_run_naming_it",
    "test_ray_executor.py::test_without_an_address_a_local_cluster_is_started_for_the_run_and_stopped",
    # test_import_inspect.py, test_import_verifiers.py: processes importing inspect_ai / verifiers (3-7 s)
    "test_import_inspect.py::test_an_inspect_task_imports_validates_and_evaluates",
    "test_import_inspect.py::test_a_csv_multiple_choice_task_imports_and_evaluates",
    "test_import_inspect.py::test_bad_input_on_the_command_line_exits_2_without_a_traceback",
    "test_import_verifiers.py::test_a_vf_init_environment_imports_validates_and_evaluates",
    "test_import_verifiers.py::test_bad_input_on_the_command_line_exits_2_without_a_traceback",
    # test_hf_dataset.py, test_integrations_trl.py: a child process imports datasets (~2.5-5 s cold)
    "test_hf_dataset.py::test_parquet_tasks_load_as_rows",
    "test_hf_dataset.py::test_example_loads_every_public_split_and_no_held_out_one",
    "test_hf_dataset.py::test_generator_environment_has_no_configs_and_says_its_splits_are_generated",
    "test_integrations_trl.py::test_the_dataset_has_the_harness_prompt_and_the_task",
    # test_integrations_verl.py: a child process loads the bundle; importing datasets (2-5 s)
    "test_integrations_verl.py::test_the_example_script_writes_what_verl_reads",
    "test_integrations_verl.py::test_the_dataset_is_what_rlhf_dataset_reads_and_the_loop_plays",
    # test_mcp_tools.py: MCP servers are real processes, 1-6 s each to start and stop
    "test_mcp_tools.py::test_eval_the_example_with_a_model_on_the_local_openai_server",
    "test_mcp_tools.py::test_closing_the_toolset_reaps_sessions_left_open",
    "test_mcp_tools.py::test_a_server_that_crashes_mid_episode",
    "test_mcp_tools.py::test_a_session_dropped_without_close_stops_its_server",
    "test_mcp_tools.py::test_episode_scope_gives_each_episode_a_fresh_server",
    "test_mcp_tools.py::test_tools_bound_to_a_session_call_like_python_tools",
    "test_mcp_tools.py::test_a_server_that_never_answers_the_handshake",
    "test_mcp_tools.py::test_a_call_that_outlasts_timeout_s_is_the_environments_fault",
    "test_mcp_tools.py::test_async_api_across_tasks",
    "test_mcp_tools.py::test_a_session_lives_across_two_asyncio_runs",
    "test_mcp_tools.py::test_allowlist_offers_only_the_listed_tools",
    "test_mcp_tools.py::test_a_prefix_resolves_the_clash",
    "test_mcp_tools.py::test_closing_a_session_reaps_its_servers",
    "test_mcp_tools.py::test_a_server_killed_with_sigkill",
    "test_mcp_tools.py::test_stdio_server_runs_in_the_bundle_directory_with_its_env",
    # test_archive_integrity.py: 66 s
    "test_archive_integrity.py::test_heldout_archive_of_another_environment_or_version",  # 23.3 s
    "test_archive_integrity.py::test_malformed_record",  # 8.2 s
    "test_archive_integrity.py::test_heldout_index_pointing_at_a_public_archive",  # 7.0 s
    "test_archive_integrity.py::test_two_spellings_of_one_path",  # 5.0 s
    "test_archive_integrity.py::test_heldout_archive_with_a_traversal",  # 4.9 s
    "test_archive_integrity.py::test_heldout_archive_holding_only_some_heldout_splits",  # 4.5 s
    "test_archive_integrity.py::test_record_digest_that_does_not_match_a_file",  # 3.5 s
    "test_archive_integrity.py::test_sparse_member",  # 1.5 s
    "test_archive_integrity.py::test_every_mismatch_is_reported",  # 1.5 s
    "test_archive_integrity.py::test_heldout_cache_entries_are_private",  # 1.4 s
    "test_archive_integrity.py::test_record_far_longer_than_its_entries",  # 1.1 s
    "test_archive_integrity.py::test_local_archive_larger_than_the_index_declares",  # 1.0 s
    "test_archive_integrity.py::test_member_larger_than_its_record_line",  # 1.0 s
    "test_archive_integrity.py::test_malformed_yank_marker",  # 0.9 s
    "test_archive_integrity.py::test_malformed_hub_index_entry",  # 0.8 s
    "test_archive_integrity.py::test_member_claiming_more_than_the_archive_holds",  # 0.7 s
    # test_bad_input.py: 32 s
    "test_bad_input.py::test_bad_manifest_in_validate",  # 24.9 s
    "test_bad_input.py::test_bad_manifest_in_process",  # 2.8 s
    "test_bad_input.py::test_bad_ref_on_the_command_line",  # 1.4 s
    "test_bad_input.py::test_thousands_of_unknown_keys_are_reported_fast",  # 1.1 s
    "test_bad_input.py::test_overlong_ref_in_info",  # 0.9 s
    "test_bad_input.py::test_overlong_path_in_validate",  # 0.8 s
    # test_cache.py: 7 s
    "test_cache.py::test_concurrent_pulls_share_one_bundle",  # 6.7 s
    "test_cache.py::test_killed_pull_leaves_nothing_half_extracted",  # 0.8 s
    # test_chat_client.py: 2 s
    "test_chat_client.py::test_concurrency_256_keeps_connections_alive",  # 1.6 s
    # test_ci_workflow.py: 22 s
    "test_ci_workflow.py::test_a_verifier_changed_without_a_score_version_bump_fails_the_score_version_step",  # 8.2 s
    "test_ci_workflow.py::test_a_verifier_that_rewards_nothing_fails_the_conformance_step",  # 7.0 s
    "test_ci_workflow.py::test_a_repository_of_good_bundles_passes",  # 5.4 s
    "test_ci_workflow.py::test_a_malformed_task_file_fails_validation_with_an_annotation",  # 1.3 s
    # test_cli.py: 5 s
    "test_cli.py::test_installed_command_end_to_end",  # 5.5 s
    # test_code_sandbox.py: 12 s
    "test_code_sandbox.py::test_ascore_matches_score_and_runs_concurrently",  # 2.2 s
    "test_code_sandbox.py::test_a_setsid_child_does_not_outlive_the_run",  # 1.7 s
    "test_code_sandbox.py::test_files_outside_the_sandbox_cannot_be_read",  # 1.5 s
    "test_code_sandbox.py::test_doctor_says_what_the_sandbox_has",  # 1.1 s
    "test_code_sandbox.py::test_host_sockets_are_out_of_reach",  # 1.0 s
    "test_code_sandbox.py::test_infinite_loop_is_killed_at_the_timeout",  # 1.0 s
    "test_code_sandbox.py::test_sleeping_threads_do_not_hold_the_run_open",  # 1.0 s
    "test_code_sandbox.py::test_a_call_that_never_returns_is_stopped",  # 1.0 s
    "test_code_sandbox.py::test_scores",  # 0.9 s
    "test_code_sandbox.py::test_a_module_level_value_too_big_to_send_is_a_reference",  # 0.6 s
    # test_code_trust.py: 68 s
    "test_code_trust.py::test_commands_without_trust_run_no_file_of_a_declarative_bundle",  # 24.8 s
    "test_code_trust.py::test_pytest_refuses_a_configuration_file_of_the_bundle",  # 10.8 s
    "test_code_trust.py::test_a_bundle_with_code_is_listed_built_and_moved_without_running_it",  # 9.1 s
    "test_code_trust.py::test_trust_runs_the_declared_entry_point_and_no_other_file",  # 5.1 s
    "test_code_trust.py::test_pytest_envhub_checks_a_bundle_without_importing_any_of_its_files",  # 5.0 s
    "test_code_trust.py::test_the_pytest_plugin_with_trust_runs_the_declared_entry_point_only",  # 4.5 s
    "test_code_trust.py::test_a_pickle_in_parquet_metadata_is_never_unpickled",  # 3.0 s
    "test_code_trust.py::test_python_m_envhub_in_the_bundle_runs_no_file_of_it",  # 1.9 s
    "test_code_trust.py::test_serving_metadata_without_trust_runs_no_file_of_the_bundle",  # 1.6 s
    "test_code_trust.py::test_pytest_refuses_the_conftest_beside_a_named_manifest",  # 1.3 s
    "test_code_trust.py::test_load_in_python_started_in_an_untrusted_bundle_refuses_before_importing",  # 1.3 s
    # test_curriculum.py: 5 s
    "test_curriculum.py::test_eval_with_a_curriculum_records_the_level_of_each_draw_and_resumes",  # 2.5 s
    "test_curriculum.py::test_eval_curriculum_usage_errors",  # 1.3 s
    "test_curriculum.py::test_eval_curriculum_on_a_generator_needs_n",  # 0.8 s
    # test_eval.py: 3 s
    "test_eval.py::test_the_episode_timeout_is_an_error_record",  # 2.0 s
    "test_eval.py::test_installed_command_runs_an_eval",  # 0.8 s
    # test_eval_openai.py: 1 s
    "test_eval_openai.py::test_installed_command_against_the_server",  # 1.3 s
    # test_example_envs.py: 29 s
    "test_example_envs.py::test_the_pytest_plugin_passes_on_every_example",  # 15.3 s
    "test_example_envs.py::test_validate_strict_check_passes_on_every_example",  # 13.3 s
    # test_example_math_and_shop.py: 3 s
    "test_example_math_and_shop.py::test_validate_check_the_pytest_plugin_and_a_push_pull_eval_round_trip",  # 2.9 s
    # test_example_number_sequences.py: 2 s
    "test_example_number_sequences.py::test_a_curriculum_run_moves_a_learning_policy_up_the_levels",  # 1.0 s
    "test_example_number_sequences.py::test_pushing_keeps_the_held_out_seeds_private",  # 0.8 s
    "test_example_number_sequences.py::test_the_same_seed_gives_the_same_task_in_another_process",  # 0.6 s
    # test_example_python_functions.py: 4 s
    "test_example_python_functions.py::test_generate_reproduces_the_task_files",  # 3.8 s
    # test_example_word_guess.py: 1 s
    "test_example_word_guess.py::test_generate_reproduces_the_task_files",  # 1.3 s
    # test_example_writing.py: 4 s
    "test_example_writing.py::test_validate_check_and_the_pytest_plugin_pass_against_a_judge_server",  # 3.7 s
    # test_heldout_leaks.py: 49 s
    "test_heldout_leaks.py::test_no_public_artifact_holds_a_held_out_task",  # 46.5 s
    "test_heldout_leaks.py::test_running_the_public_archive_makes_no_held_out_file",  # 1.4 s
    "test_heldout_leaks.py::test_a_planted_leak_is_found_in_the_public_archive",  # 1.0 s
    # test_packaging.py: 1 s
    "test_packaging.py::test_no_project_depends_on_the_unrelated_envhub",  # 0.6 s
    # test_path_dependencies.py: 30 s
    "test_path_dependencies.py::test_push_refuses_until_the_children_are_published_with_the_same_content",  # 8.1 s
    "test_path_dependencies.py::test_validate_checks_each_path_dependency",  # 8.0 s
    "test_path_dependencies.py::test_the_published_composite_loads_its_pinned_children_and_a_project_lock_records_no_path",
    "test_path_dependencies.py::test_a_composite_is_checked_evaluated_and_loaded_from_its_childrens_directories",
    "test_path_dependencies.py::test_a_malformed_dependency_is_refused_at_its_field",  # 2.8 s
    "test_path_dependencies.py::test_an_invalid_childs_manifest_is_reported_with_its_own_problems",  # 1.2 s
    # test_plugin_dists.py: 32 s
    "test_plugin_dists.py::test_plugins_lists_each_plugin_with_its_distribution_and_what_it_registers",  # 7.5 s
    "test_plugin_dists.py::test_a_plugin_verifier_kind_validates_and_checks_and_evaluates",  # 3.8 s
    "test_plugin_dists.py::test_a_plugins_format_protocol_state_and_criterion_work_together",  # 3.8 s
    "test_plugin_dists.py::test_two_plugins_claiming_one_name_is_shown_and_fails_only_where_the_name_is_used",  # 3.2 s
    "test_plugin_dists.py::test_a_plugins_policy_and_executor",  # 2.7 s
    "test_plugin_dists.py::test_a_plugins_named_generator_needs_no_trust",  # 2.2 s
    "test_plugin_dists.py::test_envhub_eval_finds_an_installed_environment_package_by_name",  # 1.8 s
    "test_plugin_dists.py::test_a_plugins_registry_scheme",  # 1.6 s
    "test_plugin_dists.py::test_broken_plugins_are_reported_with_their_distribution_and_error",  # 1.3 s
    "test_plugin_dists.py::test_envhub_load_finds_an_installed_environment_package",  # 1.2 s
    "test_plugin_dists.py::test_plugins_lists_environment_packages_from_their_manifests_without_importing_them",
    "test_plugin_dists.py::test_plugin_options_are_validated_with_the_plugins_model_and_line_numbers",  # 0.8 s
    "test_plugin_dists.py::test_an_unknown_kind_names_the_installed_ones_and_the_plugin_to_install",  # 0.7 s
    # test_plugins.py: 1 s
    "test_plugins.py::test_help_and_version_import_no_plugin_machinery",  # 0.7 s
    # test_precommit.py: 35 s
    "test_precommit.py::test_pre_commit_try_repo_installs_the_hook_and_gates_bundles",  # 35.1 s
    # test_project.py: 10 s
    "test_project.py::test_declare_lock_sync_load_reproducibly",  # 4.5 s
    "test_project.py::test_sync_reports_and_installs_python_dependencies_only_when_asked",  # 3.2 s
    "test_project.py::test_composite_inside_a_project_uses_the_locked_children",  # 1.3 s
    "test_project.py::test_composite_mixes_children_by_weight_and_records_their_provenance",  # 0.8 s
    # test_push_pull.py: 16 s
    "test_push_pull.py::test_cli_round_trip",  # 4.9 s
    "test_push_pull.py::test_installed_command_on_s3_configured_from_the_environment",  # 3.7 s
    "test_push_pull.py::test_installed_command_push_pull_info",  # 2.9 s
    "test_push_pull.py::test_pull_picks_highest_matching_non_yanked",  # 1.4 s
    "test_push_pull.py::test_push_killed_leaves_no_visible_version",  # 1.2 s
    "test_push_pull.py::test_concurrent_pushes_of_one_version_have_one_winner",  # 1.1 s
    "test_push_pull.py::test_bad_archive_refused",  # 0.8 s
    # test_pytest_plugin.py: 32 s
    "test_pytest_plugin.py::test_envhub_collect_false_keeps_bundles_among_test_data_out",  # 4.6 s
    "test_pytest_plugin.py::test_warnings_of_validate_are_pytest_warnings_and_can_be_made_strict",  # 4.2 s
    "test_pytest_plugin.py::test_bundles_outside_the_collected_paths_are_added",  # 3.4 s
    "test_pytest_plugin.py::test_the_check_limit_caps_the_tasks_played_per_split",  # 3.3 s
    "test_pytest_plugin.py::test_the_fixtures_in_an_authors_test_file",  # 2.8 s
    "test_pytest_plugin.py::test_envhubs_own_suite_does_not_collect_bundles",  # 2.5 s
    "test_pytest_plugin.py::test_each_bundle_passes_or_fails_each_check",  # 2.1 s
    "test_pytest_plugin.py::test_bad_options_are_usage_errors",  # 2.1 s
    "test_pytest_plugin.py::test_trust_from_the_ini_file",  # 2.1 s
    "test_pytest_plugin.py::test_envhub_env_with_several_bundles_needs_to_be_told_which",  # 1.6 s
    "test_pytest_plugin.py::test_without_trust_the_checks_that_run_code_fail_saying_how_to_trust",  # 1.5 s
    "test_pytest_plugin.py::test_the_plugin_can_be_switched_off",  # 1.2 s
    # test_reasoning_gym_plugin.py: 127 s
    "test_reasoning_gym_plugin.py::test_eval_with_the_reference_policy_scores_one_and_records_the_difficulty",  # 29.7 s
    "test_reasoning_gym_plugin.py::test_the_generate_script_writes_the_shipped_bundles",  # 29.1 s
    "test_reasoning_gym_plugin.py::test_the_same_seed_gives_the_same_task_in_two_processes",  # 17.2 s
    "test_reasoning_gym_plugin.py::test_eval_curriculum_moves_through_the_levels_by_success",  # 12.6 s
    "test_reasoning_gym_plugin.py::test_the_test_split_is_played_where_its_held_out_store_was_pushed",  # 6.7 s
    "test_reasoning_gym_plugin.py::test_a_shipped_bundle_passes_validate_check",  # 6.4 s
    "test_reasoning_gym_plugin.py::test_the_package_declares_the_test_split_but_cannot_play_it",  # 5.9 s
    "test_reasoning_gym_plugin.py::test_the_hook_reports_what_every_shipped_manifest_says",  # 5.0 s
    "test_reasoning_gym_plugin.py::test_the_generate_script_from_the_probe_record_makes_no_key",  # 4.8 s
    "test_reasoning_gym_plugin.py::test_a_seed_reasoning_gym_gives_up_on_is_drawn_again",  # 3.0 s
    "test_reasoning_gym_plugin.py::test_nothing_published_holds_the_test_tasks_of_a_key",  # 3.0 s
    "test_reasoning_gym_plugin.py::test_the_source_bundles_name_the_key_where_the_shipped_ones_record_its_digest",
    "test_reasoning_gym_plugin.py::test_shipped_bundles_validate_strictly",  # 1.1 s
    "test_reasoning_gym_plugin.py::test_a_built_wheel_holds_the_bundles_and_the_entry_point",  # 1.1 s
    # These use the module's script_run fixture (the generate script, about 50 s) or rg
    # (reasoning-gym imported, about 7 s): quick themselves, they would pay for it here.
    "test_reasoning_gym_plugin.py::test_the_verifier_needs_no_held_out_store_and_takes_no_forged_task",
    "test_reasoning_gym_plugin.py::test_every_bundle_is_a_dataset_of_the_pinned_reasoning_gym_and_every_dataset_is_shipped_or_listed",
    "test_reasoning_gym_plugin.py::test_the_datasets_scorer_decides_the_reward",
    "test_reasoning_gym_plugin.py::test_tasks_by_level_gives_every_level_of_the_curriculum",
    "test_reasoning_gym_plugin.py::test_the_generator_says_what_is_missing_or_wrong",
    "test_reasoning_gym_plugin.py::test_both_seedings_give_the_same_task_for_a_dataset_drawing_from_seed_plus_index",
    "test_reasoning_gym_plugin.py::test_the_verifier_refuses_an_unknown_dataset_and_a_task_of_another",
    # test_registry.py: 4 s
    "test_registry.py::test_search_by_query_and_tag",  # 1.1 s
    "test_registry.py::test_versions_in_pep440_order",  # 1.0 s
    "test_registry.py::test_equal_pep440_versions_are_one_version",  # 0.8 s
    "test_registry.py::test_sees_what_another_client_published",  # 0.7 s
    # test_resolver.py: 1 s
    "test_resolver.py::test_the_resolver_does_not_recurse_per_level",  # 0.6 s
    # test_rough_edges.py: 28 s
    "test_rough_edges.py::test_ctrl_c_on_eval_says_how_to_resume_and_the_command_resumes",  # 4.4 s
    "test_rough_edges.py::test_quiet_works_before_and_after_the_subcommand",  # 3.7 s
    "test_rough_edges.py::test_info_takes_the_url_eval_takes",  # 3.2 s
    "test_rough_edges.py::test_a_cached_pin_learns_of_a_yank_and_pull_warns",  # 2.7 s
    "test_rough_edges.py::test_verbose_after_the_subcommand_counts",  # 2.0 s
    "test_rough_edges.py::test_serve_says_a_url_that_answers",  # 1.5 s
    "test_rough_edges.py::test_a_guides_pytest_command_checks_only_that_bundle",  # 1.3 s
    "test_rough_edges.py::test_invalid_ids_are_named_once_with_a_valid_suggestion",  # 1.3 s
    "test_rough_edges.py::test_eval_against_an_unreachable_endpoint_fails_at_once_with_the_first_error",  # 1.2 s
    "test_rough_edges.py::test_getting_started_shows_what_validate_prints",  # 1.2 s
    "test_rough_edges.py::test_add_keeps_the_mode_of_pyproject_and_writes_the_lock_with_the_umask",  # 1.2 s
    "test_rough_edges.py::test_two_evals_at_once_write_two_files",  # 1.1 s
    "test_rough_edges.py::test_check_reports_a_judge_without_endpoint_once_with_the_count",  # 1.1 s
    "test_rough_edges.py::test_eval_never_takes_an_existing_default_output",  # 1.0 s
    "test_rough_edges.py::test_json_errors_are_json_on_stderr",  # 0.9 s
    # test_score_version.py: 22 s
    "test_score_version.py::test_a_ref_that_is_not_published_is_refused",  # 2.4 s
    "test_score_version.py::test_a_bad_golden_line_is_an_error_naming_the_file_and_line",  # 2.1 s
    "test_score_version.py::test_a_bump_with_no_reward_change_warns_and_fails_under_strict",  # 2.0 s
    "test_score_version.py::test_score_version_never_goes_down",  # 1.6 s
    "test_score_version.py::test_newest_compares_each_bundle_with_the_newest_version_of_its_name",  # 1.5 s
    "test_score_version.py::test_the_arith_examples_golden_lines_catch_a_loosened_tolerance",  # 1.5 s
    "test_score_version.py::test_a_changed_verifier_without_a_score_version_bump_fails",  # 1.4 s
    "test_score_version.py::test_the_score_version_hook_fails_a_commit_that_changes_a_reward",  # 1.4 s
    "test_score_version.py::test_nothing_to_compare_is_a_warning",  # 1.4 s
    "test_score_version.py::test_python_verifiers_replay_only_with_trust",  # 1.3 s
    "test_score_version.py::test_the_same_change_with_score_version_bumped_passes",  # 1.3 s
    "test_score_version.py::test_the_published_bundle_unchanged_passes",  # 1.1 s
    "test_score_version.py::test_the_published_versions_golden_trajectories_are_replayed_too",  # 1.0 s
    "test_score_version.py::test_eval_records_are_golden_lines",  # 0.8 s
    "test_score_version.py::test_check_replays_the_golden_trajectories_against_their_recorded_rewards",  # 0.7 s
    # test_serve.py: 16 s
    "test_serve.py::test_wall_clock_limit_ends_a_busy_episode",  # 3.2 s
    "test_serve.py::test_idle_episodes_expire_and_free_their_slot",  # 2.3 s
    "test_serve.py::test_envhub_eval_runs_against_the_server",  # 1.9 s
    "test_serve.py::test_serve_registry_ids_with_and_without_their_heldout_store",  # 1.8 s
    "test_serve.py::test_concurrency_limit_is_a_429_and_frees_on_close",  # 1.4 s
    "test_serve.py::test_served_manifest_is_the_public_one_without_held_out_seeds_or_secrets",  # 1.1 s
    "test_serve.py::test_concurrent_eval_through_the_client",  # 1.0 s
    "test_serve.py::test_heldout_session_never_returns_an_answer",  # 0.8 s
    "test_serve.py::test_server_without_tokens_refuses_heldout_to_everyone",  # 0.8 s
    "test_serve.py::test_lists_environments_with_splits_and_metadata",  # 0.7 s
    "test_serve.py::test_require_token_protects_everything_but_health",  # 0.6 s
    # test_task_files.py: 34 s
    "test_task_files.py::test_bad_parquet_is_refused_by_validate_build_and_eval",  # 24.8 s
    "test_task_files.py::test_bad_jsonl_is_refused_by_validate_and_eval",  # 6.4 s
    "test_task_files.py::test_parquet_dates_are_a_warning_and_play_as_their_text",  # 2.3 s
    "test_task_files.py::test_parquet_chat_prompts_are_valid",  # 0.7 s
    # test_terminal_output.py: 21 s
    "test_terminal_output.py::test_registry_text_shows_escapes",  # 14.4 s
    "test_terminal_output.py::test_validate_and_errors_quoting_a_manifest_value_show_escapes",  # 4.8 s
    "test_terminal_output.py::test_info_of_a_bundle_shows_escapes",  # 2.2 s
    # Modules added since that run, measured on their own (one process, the same machine):
    # test_example_terminal_tasks.py: 7 s
    "test_example_terminal_tasks.py::test_the_reference_scores_one_and_doing_nothing_less",  # 5.6 s
    "test_example_terminal_tasks.py::test_eval_of_the_reference_from_the_command_line",  # 1.5 s
    # test_rollout_record.py: 1 s
    "test_rollout_record.py::test_resuming_a_file_with_a_broken_line_is_an_error_without_a_traceback",  # 1.0 s
    # test_sandbox_state.py: 3 s
    "test_sandbox_state.py::test_overlong_commands_are_killed_and_the_episode_goes_on",  # 1.4 s
    "test_sandbox_state.py::test_a_fork_bomb_and_a_full_disk_are_contained_and_the_episode_goes_on",  # 1.4 s
    # test_shell_containment.py: 5 s
    "test_shell_containment.py::test_a_fork_bomb_is_contained_and_reported",  # 2.1 s
    "test_shell_containment.py::test_a_command_past_its_timeout_is_killed_and_reported",  # 1.6 s
    "test_shell_containment.py::test_cpu_time_over_the_limit_is_killed_and_reported",  # 1.4 s
    # test_workspace_tests.py: 9 s
    "test_workspace_tests.py::test_a_runner_killed_at_its_timeout_is_reported",  # 2.2 s
    "test_workspace_tests.py::test_validate_check_trust",  # 2.0 s
    "test_workspace_tests.py::test_a_scripted_agent_cannot_print_its_way_to_a_reward",  # 1.5 s
    "test_workspace_tests.py::test_the_reference_solution_scores_one",  # 1.3 s
    "test_workspace_tests.py::test_the_tests_are_out_of_the_agents_reach",  # 1.2 s
    "test_workspace_tests.py::test_eval_with_a_model_scripting_bash_calls",  # 1.0 s
)


def _is_slow(nodeid: str) -> bool:
    nodeid = nodeid.removeprefix("tests/")
    return any(nodeid == entry or nodeid.startswith((entry + "::", entry + "[")) for entry in SLOW)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests in :data:`SLOW` ``slow``."""
    for item in items:
        if _is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
