"""Framework recipes: the catalog files, name resolution, custom recipes, and what a config gets."""

from __future__ import annotations

import pytest
import yaml

from perfmodel.catalog.frameworks import framework_names, get_recipe, recipe_of, recipes, resolve_framework
from perfmodel.config import load_workload
from perfmodel.errors import ConfigError
from perfmodel.recipes import FrameworkRecipe
from perfmodel.workload import FRAMEWORKS


def load_config_text(text: str):
    return load_workload(yaml.safe_load(text))


BASE = "model:\n  name: llama2-7b\ntraining:\n  tokens: 1.0e6\nhardware:\n  gpu: A100-80GB\n"

ISSUE_21_STACKS = ("hf-eager", "torch-eager", "torch-compile", "liger", "unsloth", "torchtune", "litgpt",
                   "lightning", "ludwig", "deepspeed", "megatron", "nemo", "torchtitan", "composer")


def test_every_stack_the_issue_names_has_a_recipe_with_sources():
    for name in ISSUE_21_STACKS:
        r = get_recipe(name)
        assert r.name == name
        assert r.sources, f"{name} cites nothing"
        if r.fused:
            assert "fused" in r.sources, f"{name}: its fused kernels have no source"


def test_every_family_is_one_the_learned_model_knows():
    for r in recipes().values():
        assert r.family in (*FRAMEWORKS, "other"), r.name


def test_aliases_resolve_to_their_recipe_and_never_collide():
    seen: dict[str, str] = {}
    for r in recipes().values():
        for alias in (r.name, *r.aliases):
            assert alias not in seen, f"{alias} is both {seen[alias]} and {r.name}"
            seen[alias] = r.name
    assert resolve_framework("composer-fsdp")[0] == "composer"
    assert resolve_framework("Liger-Kernel")[0] == "liger"
    assert resolve_framework("torch.compile")[0] == "torch-compile"


def test_a_near_miss_is_a_typo_error_and_a_far_name_is_costed_as_eager_and_says_so():
    with pytest.raises(ConfigError, match="did you mean torchtune"):
        resolve_framework("torchtun")
    name, recipe, note = resolve_framework("acme-trainer")
    assert name == "acme-trainer" and recipe is not None and recipe.fused == () and recipe.attention == "sdpa"
    assert note is not None and "not in the catalog" in note and "other" in note


def test_a_custom_recipe_starts_from_its_base_and_changes_what_it_says():
    name, recipe, note = resolve_framework({"name": "my-stack", "base": "liger", "compile": True, "optimizer_impl": "foreach"})
    assert name == "my-stack" and recipe is not None
    assert recipe.fused == get_recipe("liger").fused and recipe.compile and recipe.optimizer_impl == "foreach"
    assert note is not None and "custom recipe on liger" in note
    with pytest.raises(ConfigError, match="unknown key framework.fusd"):
        resolve_framework({"name": "x", "fusd": ["norm"]})
    with pytest.raises(ConfigError, match="framework.base must be"):
        resolve_framework({"name": "x", "base": "nothing-like-it"})
    with pytest.raises(ConfigError, match="fused kind 'matmul'"):
        resolve_framework({"name": "x", "fused": ["matmul"]})


def test_a_config_gets_the_recipes_defaults_unless_it_says_otherwise():
    liger = load_config_text(BASE + "framework: liger\n")
    assert liger.training.fused_cross_entropy and liger.training.attention_kernel == "sdpa"
    titan = load_config_text(BASE + "framework: torchtitan\n")
    assert titan.training.attention_kernel == "flash" and not titan.training.fused_cross_entropy
    explicit = load_config_text(BASE.replace("tokens: 1.0e6", "tokens: 1.0e6\n  attention_kernel: eager") + "framework: torchtitan\n")
    assert explicit.training.attention_kernel == "eager"
    compiled = load_config_text(BASE + "framework: torch-compile\n")
    assert compiled.training.torch_compile
    plain = load_config_text(BASE)
    assert plain.framework == "hf-eager" and any("framework not given" in a for a in plain.assumptions)


def test_an_unknown_or_custom_framework_travels_with_the_workload():
    w = load_config_text(BASE + "framework: acme-trainer\n")
    assert w.framework == "acme-trainer" and recipe_of(w).name == "acme-trainer"
    assert any("acme-trainer: not in the catalog" in a for a in w.assumptions)
    w = load_config_text(BASE + "framework:\n  name: fast\n  base: torch-eager\n  fused: [norm, rotary]\n")
    assert isinstance(w.recipe, FrameworkRecipe) and recipe_of(w).fused == ("norm", "rotary")
    known = load_config_text(BASE + "framework: unsloth\n")
    assert known.recipe is None and recipe_of(known).optimizer_state == "8bit"


def test_the_catalog_lists_only_files_whose_name_is_their_key():
    assert set(framework_names()) == set(recipes())
    assert "other" in framework_names() and "hf-eager" in framework_names()


def test_the_resolved_config_of_a_custom_recipe_reads_back_as_the_same_recipe():
    from perfmodel.config.native import workload_to_native

    w = load_config_text(BASE + "framework:\n  name: fast\n  base: torch-eager\n  fused: [norm, rotary]\n")
    again = load_workload(workload_to_native(w))
    import dataclasses

    def costed(r: FrameworkRecipe) -> FrameworkRecipe:  # everything but where it came from
        return dataclasses.replace(r, sources={}, notes="")

    assert costed(recipe_of(again)) == costed(recipe_of(w))
    named = load_config_text(BASE + "framework: acme-trainer\n")
    assert workload_to_native(named)["framework"] == "acme-trainer"


def test_a_recipes_softmax_mode_is_checked():
    assert get_recipe("dle-ngc").softmax == "native" and get_recipe("hf-eager").softmax == "fp32"
    with pytest.raises(ConfigError, match="softmax must be one of fp32, native"):
        FrameworkRecipe(name="x", softmax="fp16")


def test_the_stacks_that_clip_their_gradients_by_default_say_so():
    """hf-eager (the Trainer's max_grad_norm 1.0), Ludwig (clipglobalnorm 0.5) and Megatron (clip_grad
    1.0) clip before each step and their recipes cite where; plain PyTorch loops, torchtune and
    Lightning do not by default. The assumption line that names the recipe says it."""
    from perfmodel.catalog.frameworks import get_recipe

    for name in ("hf-eager", "ludwig", "megatron", "unsloth", "liger"):
        recipe = get_recipe(name)
        assert recipe.grad_clip and "grad_clip" in recipe.sources and "gradient clipping" in recipe.describe()
    for name in ("torch-eager", "torchtune", "lightning", "other"):
        assert not get_recipe(name).grad_clip and "gradient clipping" not in get_recipe(name).describe()


def test_only_megatron_stacks_reduce_gradients_without_copying_them_into_buckets():
    """torch DDP (and apex's, DeepSpeed's) copy each gradient into a bucket and back; Megatron-Core
    accumulates into its contiguous grad buffers, and its recipes cite where."""
    off = {name for name, r in recipes().items() if not r.grad_bucket_copies}
    assert off == {"megatron", "nemo"}
    assert all("grad_bucket_copies" in get_recipe(name).sources for name in off)


@pytest.mark.parametrize("key", ["grad_bucket_copies", "grad_clip", "compile"])
def test_a_yes_no_recipe_key_takes_true_or_false_only(key):
    text = BASE + f"framework:\n  name: mine\n  base: hf-eager\n  {key}: maybe\n"
    with pytest.raises(ConfigError, match=f"{key} must be true or false, got 'maybe'"):
        load_config_text(text)
