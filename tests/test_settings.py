"""Settings: read once from the environment; secrets never shown."""

from __future__ import annotations


def test_settings_never_show_secrets() -> None:
    from envhub.settings import load_settings

    settings = load_settings({"ENVHUB_HOME": "/h", "ENVHUB_CACHE": "/c", "HF_TOKEN": "hf_secret",
                              "OPENAI_API_KEY": "sk-secret", "JUDGE_KEY": "jk-secret"})
    assert settings.secret("JUDGE_KEY") == "jk-secret"
    assert "secret" not in repr(settings)
