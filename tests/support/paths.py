"""Where the tests find the project: its root folder and the fixtures kept with the tests."""
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
# Model Garden's own checkpoints, SavedModels and outputs (written by make_fixtures.py there).
MODEL_GARDEN_FIXTURES = REPO_ROOT / "tests" / "support" / "fixtures_model_garden"
