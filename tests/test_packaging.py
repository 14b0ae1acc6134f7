"""A plain (non-editable) install ships the configs and works from any folder."""
import os
import subprocess
import sys


def test_wheel_install_ships_configs(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    wheels, target = tmp_path / "wheels", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(pip + ["wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), root],
                   check=True, cwd=str(tmp_path))
    wheel = next(wheels.glob("*.whl"))
    subprocess.run(pip + ["install", "--no-deps", "--target", str(target), str(wheel)],
                   check=True)
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run(
        [sys.executable, "-c", "import zoo, zoo.data, zoo.metrics; print(zoo.__file__);"
         "print(' '.join(zoo.list_models())); print(zoo.get_model('ssd_resnet50').num_params())"],
        cwd=str(tmp_path), env=env, check=True, capture_output=True, text=True).stdout.split("\n")
    assert out[0].startswith(str(target))
    assert out[1].split() == sorted(os.path.splitext(f)[0] for f in os.listdir(
        os.path.join(root, "configs")) if f.endswith(".yaml"))
    assert int(out[2]) > 25_000_000
