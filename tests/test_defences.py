"""Client-side defences: orthogonal transforms, DP input noise calibration, specs."""
import time

import pytest
import torch
from autodp.dp_bank import get_eps_ana_gaussian

from vfl import data
from vfl.defences import (DPInputNoise, OrthogonalTransform, PatchOrthogonalTransform, SemiOrthogonalTransform,
                          analytic_gaussian_sigma, estimate_sensitivity, parse_defences, parse_spec,
                          random_orthogonal, split_specs, transformed_shape)
from vfl.errors import SplitlabError
from vfl.models import build_split
from vfl.training import TrainConfig, load_checkpoint, load_data, save_checkpoint, train_split


def test_random_orthogonal_is_orthogonal_seeded_and_dense():
    u = random_orthogonal(50, seed=3)
    torch.testing.assert_close(u @ u.T, torch.eye(50, dtype=torch.float64), atol=1e-12, rtol=0)
    assert torch.equal(u, random_orthogonal(50, seed=3)) and not torch.equal(u, random_orthogonal(50, seed=4))
    assert float((u.abs() > 1e-6).float().mean()) > 0.99                  # dense, not a permutation
    s = random_orthogonal(20, 30, seed=0)                                  # semi-orthogonal: U U^T = I
    torch.testing.assert_close(s @ s.T, torch.eye(20, dtype=torch.float64), atol=1e-12, rtol=0)


def test_a_dense_first_layer_absorbs_the_orthogonal_transform():
    # H = (XU) W^T = X (W U^T)^T: the transformed client with weights W U^T sends exactly what the
    # plain client with W sends (Lemma 1), so an architecture-only attacker cannot tell them apart.
    transform = OrthogonalTransform((1, 28, 28), seed=0)
    plain, _ = build_split("mlp", 1, seed=0)
    plain = plain.double()
    absorbed, _ = build_split("mlp", 1, seed=0)
    absorbed = absorbed.double()
    with torch.no_grad():
        absorbed[1].weight.copy_(plain[1].weight @ transform.matrix)
    x = torch.rand(4, 1, 28, 28, dtype=torch.float64)
    torch.testing.assert_close(absorbed(transform.on_input(x, True)), plain(x), rtol=1e-10, atol=1e-10)


@pytest.mark.slow
def test_transforms_preserve_norms_and_shapes():
    x = torch.rand(3, 3, 32, 32, dtype=torch.float64)
    for defence in (OrthogonalTransform((3, 32, 32)), PatchOrthogonalTransform((3, 32, 32), patch=4)):
        y = defence.on_input(x, True)
        assert y.shape == x.shape
        torch.testing.assert_close(y.flatten(1).norm(dim=1), x.flatten(1).norm(dim=1))
    patch = PatchOrthogonalTransform((3, 32, 32), patch=4)
    changed = x.clone()
    changed[:, :, :4, :4] += 1.0                                           # touch only the first patch
    diff = (patch.on_input(changed, True) - patch.on_input(x, True)).abs().sum(1)
    assert float(diff[:, 4:, :].max()) == 0.0 and float(diff[:, :, 4:].max()) == 0.0
    semi = SemiOrthogonalTransform((1, 28, 28), dim=1024)
    assert semi.on_input(torch.rand(2, 1, 28, 28), True).shape == (2, 1024)
    assert transformed_shape([semi], (1, 28, 28)) == (1024,)


def test_the_secret_matrix_is_converted_once_per_device_and_dtype():
    transform = OrthogonalTransform((1, 28, 28))
    x32, x64 = torch.rand(2, 1, 28, 28), torch.rand(2, 1, 28, 28, dtype=torch.float64)
    first = transform.matrix_like(x32)
    assert first.dtype == torch.float32 and transform.matrix_like(x32) is first       # cached, not copied
    assert transform.matrix_like(x64).dtype == torch.float64
    torch.testing.assert_close(transform.on_input(x32, True), (x32.flatten(1) @ first).view(x32.shape))


def test_analytic_gaussian_calibration_matches_the_paper_and_its_definition():
    sigma = analytic_gaussian_sigma(6.0, 0.5)
    assert sigma == pytest.approx(0.267649, abs=1e-5)                      # digest T6: sigma / GS
    assert get_eps_ana_gaussian(sigma, 0.5) == pytest.approx(6.0, rel=1e-6)  # the inverse gives epsilon back
    assert analytic_gaussian_sigma(6.0, 0.5, 5.9427) == pytest.approx(1.5905, abs=1e-3)
    with pytest.raises(SplitlabError, match="1e-10 <= delta <= 0.99"):
        analytic_gaussian_sigma(1.0, 1.5)
    for epsilon in (float("nan"), float("inf")):                           # autodp would loop forever
        with pytest.raises(SplitlabError, match="is not finite"):
            analytic_gaussian_sigma(epsilon, 0.5)


def test_sensitivity_estimate_on_mnist5k_is_close_to_the_papers_mnist_value():
    images = data.load("mnist5k", "train").images
    assert estimate_sensitivity(images, seed=0) == pytest.approx(5.94, rel=0.05)


def test_dp_noise_has_the_calibrated_scale_on_training_and_attacked_inputs():
    (defence,) = parse_defences("input-dp:epsilon=6,delta=0.5,sensitivity=5.9427")
    assert isinstance(defence, DPInputNoise) and defence.sigma == pytest.approx(1.5905, abs=1e-3)
    x = torch.zeros(20000)
    assert float(defence.on_input(x, True).std()) == pytest.approx(defence.sigma, rel=0.03)
    assert float(defence.on_input(x, False).std()) == pytest.approx(defence.sigma, rel=0.03)


def test_spec_errors_name_the_fix():
    with pytest.raises(SplitlabError, match="unknown defence 'rotation'"):
        parse_spec("rotation")
    with pytest.raises(SplitlabError, match="does not take option 'dim'"):
        parse_spec("orthogonal:dim=3")
    with pytest.raises(SplitlabError, match="needs option dim"):
        parse_spec("semi-orthogonal")
    with pytest.raises(SplitlabError, match="needs training images"):
        parse_defences("input-dp")
    with pytest.raises(SplitlabError, match="needs image inputs"):      # the shape is followed through
        parse_spec("semi-orthogonal:dim=1024+patch-orthogonal", (1, 28, 28))
    assert parse_spec("semi-orthogonal:dim=500") and parse_spec("patch-orthogonal:patch=5")  # no shape given
    with pytest.raises(SplitlabError, match="cannot take it"):
        TrainConfig(arch="cnn", defence="semi-orthogonal:dim=1024")


def _defended_client():
    config = TrainConfig(arch="mlp", epochs=1, defence="semi-orthogonal:dim=900,seed=2", device="cpu")
    train, test = load_data(config)
    return train_split(config, train, test, progress=False), train, test


@pytest.mark.slow
def test_defended_client_trains_at_the_plain_clients_accuracy():
    trained, train, test = _defended_client()
    assert trained.client.model[1].in_features == 900
    plain = train_split(TrainConfig(arch="mlp", epochs=1, device="cpu"), train, test, progress=False)
    assert abs(trained.accuracy - plain.accuracy) < 0.03                   # the transform costs no accuracy


@pytest.mark.slow
def test_a_defended_clients_checkpoint_rebuilds_the_same_secret(tmp_path):
    trained, _, test = _defended_client()
    save_checkpoint(tmp_path / "c.pt", trained)
    reloaded = load_checkpoint(tmp_path / "c.pt", "cpu")
    x = test.images[:5]
    torch.testing.assert_close(reloaded.client.infer(x), trained.client.infer(x))


def test_defence_lists_keep_each_specs_own_options_together():
    assert split_specs("none,input-dp:epsilon=6,delta=0.5, orthogonal") == ["none", "input-dp:epsilon=6,delta=0.5", "orthogonal"]
    assert split_specs("semi-orthogonal:dim=500,seed=1+input-dp:epsilon=6,delta=0.5") == [
        "semi-orthogonal:dim=500,seed=1+input-dp:epsilon=6,delta=0.5"]
    assert split_specs("") == []


def test_a_stuck_or_failing_calibration_names_dp_sigma_as_the_way_out(monkeypatch):
    import vfl.defences.input_dp as defences
    monkeypatch.setattr(defences, "CALIBRATION_SECONDS", 0.2)
    monkeypatch.setattr(defences, "_unit_sigma", lambda epsilon, delta: time.sleep(120))
    start = time.perf_counter()
    with pytest.raises(SplitlabError, match="did not finish in 0.2 s; .* input-dp:sigma=S"):
        parse_defences("input-dp:epsilon=6,delta=0.5,sensitivity=1")
    assert time.perf_counter() - start < 60         # not the stuck call's 120 s, however loaded the machine
    monkeypatch.setattr(defences, "_unit_sigma", lambda epsilon, delta: 1 / 0)
    with pytest.raises(SplitlabError, match="failed \\(ZeroDivisionError\\); .* input-dp:sigma=S"):
        analytic_gaussian_sigma(6.0, 0.5)


def test_calibration_converges_across_its_whole_epsilon_and_delta_range():
    for epsilon in (1e-3, 1.0, 10.0):                                  # the corners of the allowed box
        for delta in (1e-10, 0.5, 0.99):
            sigma = analytic_gaussian_sigma(epsilon, delta)
            assert sigma > 0 and get_eps_ana_gaussian(sigma, delta) == pytest.approx(epsilon, rel=1e-3)


@pytest.mark.parametrize("spec,message", [
    ("", "has an empty item"), ("+", "has an empty item"), ("orthogonal+", "has an empty item"),
    ("+input-dp:sigma=1", "has an empty item"),
    ("patch-orthogonal:patch=3.5", "patch=3.5 is not an integer"),
    ("semi-orthogonal:dim=900.5", "dim=900.5 is not an integer"),
    ("input-dp:epsilon=nan", "epsilon=nan is not finite"), ("input-dp:epsilon=inf", "epsilon=inf is not finite"),
    ("input-dp:epsilon=0", "0.001 <= epsilon <= 10"), ("input-dp:epsilon=15", "0.001 <= epsilon <= 10"),
    ("input-dp:delta=1", "1e-10 <= delta <= 0.99"), ("input-dp:delta=0", "1e-10 <= delta <= 0.99"),
    ("input-dp:sensitivity=0", "sensitivity > 0"), ("input-dp:sigma=-0.1", "sigma >= 0"), ("input-dp:sigma=inf", "not finite"),
    ("orthogonal:seed=-1", "0 <= seed <= 9223372036854775807"), ("orthogonal:seed=2e19", "seed <= 9"),
    ("orthogonal:seed=1.5", "seed=1.5 is not an integer"), ("activation-noise:sigma=x", "sigma='x' is not a number"),
    ("orthogonal:seed", "is not key=value"), ("orthogonal:seed=1,seed=2", "option seed twice"),
])
def test_every_option_is_checked_for_type_finiteness_and_range(spec, message):
    with pytest.raises(SplitlabError, match=message):
        parse_spec(spec)


def test_shape_dependent_bounds():
    assert parse_spec("patch-orthogonal:patch=7", (1, 28, 28))[0].options == {"patch": 7}
    with pytest.raises(SplitlabError, match="must divide the image size 28x28"):
        parse_spec("patch-orthogonal:patch=5", (1, 28, 28))
    with pytest.raises(SplitlabError, match="must divide"):
        PatchOrthogonalTransform((1, 28, 28), patch=5)
    with pytest.raises(SplitlabError, match="patch=3.5 is not an integer"):           # built as 3 before
        PatchOrthogonalTransform((1, 30, 30), patch=3.5)
    with pytest.raises(SplitlabError, match="float64 matrix of 256 MiB; use dim <= 42799"):
        parse_spec("semi-orthogonal:dim=42800", (1, 28, 28))
    assert parse_spec("semi-orthogonal:dim=42799", (1, 28, 28))[0].options["dim"] == 42799
    assert parse_spec("orthogonal:seed=9223372036854775807")[0].options["seed"] == 2**63 - 1   # exact, not a float


@pytest.mark.parametrize("spec,hook", [
    ("input-dp:sigma=0.5,seed=3", "on_input"), ("activation-noise:sigma=0.5,seed=3", "on_activations"),
    ("received-gradient-noise:sigma=0.5,seed=3", "on_gradient")])
def test_noise_defences_draw_from_their_own_seeded_generator(spec, hook):
    def draws(text):
        (defence,) = parse_defences(text)
        call = getattr(defence, hook)
        x = torch.zeros(2000)
        return [call(x) if hook == "on_gradient" else call(x, True) for _ in range(2)]
    state = torch.get_rng_state()
    first, again = draws(spec), draws(spec)
    assert torch.equal(torch.get_rng_state(), state)                    # the global stream is not touched
    assert all(torch.equal(a, b) for a, b in zip(first, again))         # same seed, same numbers
    assert not torch.equal(first[0], first[1])                          # fresh noise on every call
    assert not torch.equal(first[0], draws(spec.replace("seed=3", "seed=4"))[0])
    assert float(first[0].std()) == pytest.approx(0.5, rel=0.06)
    assert torch.equal(draws(spec.replace(",seed=3", ""))[0], draws(spec.replace("seed=3", "seed=0"))[0])


def test_hfl_upload_defences_use_the_same_parser():
    from vfl.defences.upload import GaussianNoise, QuantSettings, parse_defence
    assert parse_defence("gaussian:sigma=1e-3, clip=4") == GaussianNoise(1e-3, 4.0)
    assert QuantSettings.__dataclass_fields__["bits"].metadata["option"].check.kind is int
    for upload, client in (("gaussian:sigma=nan", "activation-noise:sigma=nan"),
                           ("gaussian:sigma=-1", "activation-noise:sigma=-1")):
        with pytest.raises(SplitlabError) as hfl_error:
            parse_defence(upload)
        with pytest.raises(SplitlabError) as vfl_error:
            parse_spec(client)
        assert str(hfl_error.value).split(" ", 2)[2] == str(vfl_error.value).split(" ", 2)[2]
    with pytest.raises(SplitlabError, match="bits=4.5 is not an integer"):
        parse_defence("quant:bits=4.5")
    with pytest.raises(SplitlabError, match="needs option keep=<value>"):
        parse_defence("topk")
