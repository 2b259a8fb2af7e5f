"""Framework recipes as data: one YAML file per training stack under `frameworks/` (the file name is
the key users type), read lazily and cached. `resolve_framework` turns what a config says
(`framework: NAME`, an alias, an unknown name, or a custom recipe mapping) into a recipe and the
assumption line that says which recipe was used.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
from typing import Any

from perfmodel.catalog.data import CATALOG_DIR, _read, norm
from perfmodel.errors import ConfigError, quote
from perfmodel.recipes import RECIPE_FIELDS, FrameworkRecipe, recipe_from_mapping
from perfmodel.workload import Workload

FRAMEWORKS_DIR = CATALOG_DIR / "frameworks"
DEFAULT_FRAMEWORK = "hf-eager"
"""The recipe a config that names no framework gets (the commonest user stack)."""
UNKNOWN_FRAMEWORK = "other"
"""The recipe an unknown framework name maps to (eager PyTorch), named in the assumptions."""


@functools.cache
def recipes() -> dict[str, FrameworkRecipe]:
    """Recipe name -> recipe, for every catalog file."""
    out: dict[str, FrameworkRecipe] = {}
    for path in sorted(FRAMEWORKS_DIR.glob("*.yaml")):
        recipe = recipe_from_mapping(_read(path), where=str(path))
        if recipe.name != path.stem:
            raise ConfigError(f"{path}: name {recipe.name!r} must equal the file name {path.stem!r}")
        out[recipe.name] = recipe
    return out


@functools.cache
def _index() -> dict[str, str]:
    index: dict[str, str] = {}
    for name, recipe in recipes().items():
        for alias in (name, *recipe.aliases):
            index[norm(alias)] = name
    return index


def framework_names() -> tuple[str, ...]:
    """Every recipe key (what `framework:` accepts besides aliases and custom recipes)."""
    return tuple(recipes())


def find_recipe(name: str) -> FrameworkRecipe | None:
    """The recipe called `name` (key or alias, any case), or None."""
    key = _index().get(norm(name))
    return recipes()[key] if key else None


def get_recipe(name: str) -> FrameworkRecipe:
    """The recipe called `name`; unknown names get the `other` recipe (eager PyTorch)."""
    return find_recipe(name) or recipes()[UNKNOWN_FRAMEWORK]


def recipe_of(w: Workload) -> FrameworkRecipe:
    """The recipe a workload runs: its own (a custom one) or the catalog's for its framework."""
    return w.recipe if w.recipe is not None else get_recipe(w.framework)


def typo_of(name: str) -> str | None:
    """A recipe name `name` is probably a typo of (difflib ratio >= 0.8), or None."""
    close = difflib.get_close_matches(norm(name), list(_index()), n=1, cutoff=0.8)
    return _index()[close[0]] if close else None


def resolve_framework(value: Any) -> tuple[str, FrameworkRecipe | None, str | None]:
    """What a config's `framework:` says, as (framework name, custom recipe or None, assumption or
    None). A known name or alias gives its key; a near miss of a known name is a ConfigError (a
    typo); any other name is kept and costed with the `other` recipe, which the assumption names;
    a mapping is a custom recipe: `name`, optionally `base` (a catalog recipe it starts from), and
    any recipe field."""
    if isinstance(value, dict):
        return _custom(value)
    name = str(value).strip()
    recipe = find_recipe(name)
    if recipe is not None:
        return recipe.name, None, None
    typo = typo_of(name)
    if typo is not None:
        raise ConfigError(
            f"framework must be a known stack or a recipe; got {quote(name)}; did you mean {typo}? "
            f"(`perfmodel frameworks` lists them)"
        )
    other = recipes()[UNKNOWN_FRAMEWORK]
    return (
        name,
        dataclasses.replace(other, name=name),
        f"framework {name}: not in the catalog, costed as {other.describe()}; describe it with a recipe "
        f"(framework: {{name: {name}, base: torch-eager, fused: [...]}}, docs/config.md) for a better estimate",
    )


def _custom(value: dict[str, Any]) -> tuple[str, FrameworkRecipe, str]:
    data = dict(value)
    base_name = data.pop("base", UNKNOWN_FRAMEWORK)
    base = find_recipe(str(base_name))
    if base is None:
        raise ConfigError(
            f"framework.base must be a catalog recipe ({', '.join(framework_names())}); got {quote(base_name)}"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("framework.name is required for a custom recipe (framework: {name: my-stack, base: ...})")
    unknown = sorted(str(k) for k in data if k not in (*RECIPE_FIELDS, "name", "sources", "notes"))
    if unknown:
        raise ConfigError(
            f"unknown key framework.{unknown[0]}; a custom recipe takes name, base and {', '.join(RECIPE_FIELDS)}"
        )
    inherited = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    inherited.update(aliases=(), title=f"a custom recipe based on {base.name}", sources={"base": base.name}, notes="")
    merged = {**inherited, **data}
    recipe = recipe_from_mapping(merged, where="framework")
    return recipe.name, recipe, f"framework {recipe.name}: a custom recipe on {base.name}: {recipe.describe()}"
