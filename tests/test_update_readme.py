"""`copier update` across the release that cut the app's README to the owner's work and moved its reference to docs/.

The version before it is this repo's last commit with the long README (LONG_README), tagged 0.0.10 in a temporary
repo; the version after it is the working tree, tagged 0.1.0. The README is shared: the owner's edits stay, and the
update merges them with the template's new README without a conflict.
"""

from __future__ import annotations

import pytest
from renders import render
from template_versions import append, commit, generate, new_repo, release, update
from test_update_regrouping import copy_commit
from update_support import OWNER_README, assert_no_leftovers, customise, files

pytestmark = pytest.mark.xdist_group("update-readme")

# The last commit of this repo whose app README held the whole reference (951 lines, no docs/ but history-shapes.md).
LONG_README = "f6231f3e5df6254300ad842e3d9b908f97f71826"
OWNER_TITLE = "# Acme support bot\n"


@pytest.fixture(scope="module")
def versions(tmp_path_factory: pytest.TempPathFactory):
    repo = new_repo(tmp_path_factory.mktemp("template") / "repo")
    release(repo, "0.0.10", lambda repo: copy_commit(repo, LONG_README), from_working_tree=False)
    release(repo, "0.1.0")
    return repo


def test_a_customised_app_with_the_long_readme_merges_the_new_one_cleanly(versions, tmp_path):
    app = generate(tmp_path / "app", versions, "0.0.10")
    assert len((app / "README.md").read_text().splitlines()) > 900, "0.0.10 has the long README"
    customise(app)  # a paragraph of the owner's under "Quick start", among other changes
    readme = (app / "README.md").read_text()
    (app / "README.md").write_text(OWNER_TITLE + readme.split("\n", 1)[1])  # and the owner's own title
    commit(app, "My agent")

    update(app, "0.1.0")

    assert_no_leftovers(app)
    now = files(app)
    fresh = files(render(tmp_path / "fresh", {}, src=versions, vcs_ref="0.1.0"))
    # The new README, with the owner's title and paragraph where the owner put them.
    expected = fresh["README.md"].decode().replace("## Quick start\n\n", "## Quick start\n\n" + OWNER_README, 1)
    assert now["README.md"].decode() == OWNER_TITLE + expected.split("\n", 1)[1]
    # The reference arrived in docs/, as a fresh render has it.
    docs = sorted(name for name in fresh if name.startswith("docs/"))
    assert len(docs) >= 10 and [name for name in docs if now.get(name) != fresh[name]] == []
    # (tests/test_update_regrouping.py updates a customised app from the same commit and runs its tests, the
    # settings test that reads docs/configuration.md among them.)


def test_an_owner_section_at_the_end_of_the_long_readme_is_one_conflict_that_keeps_both_sides(versions, tmp_path):
    """A section the owner appended follows the long README's last section, which moved to docs/: the update
    cannot tell where it goes, so it asks once, with the owner's section and the new README's end side by side."""
    app = generate(tmp_path / "app", versions, "0.0.10")
    append(app / "README.md", "\n## Our team\n\nAsk Acme's platform team.\n")
    commit(app, "My README")
    update(app, "0.1.0")
    readme = (app / "README.md").read_text()
    assert [line for line in readme.splitlines() if line.startswith("<<<<<<<")] == ["<<<<<<< before updating"]
    ours, theirs = readme.split("Ask Acme's platform team.\n=======\n")
    assert "## Reference" in theirs and theirs.endswith("\n>>>>>>> after updating\n")
