import math
import warnings
from unittest import mock

import numpy as np
import pytest
import torch
import torchvision
from pytorch_fid import inception as fid_inception
from pytorch_fid.fid_score import calculate_frechet_distance

from attacks import metrics
from attacks.result import Reconstruction
from vfl.errors import SplitlabError


@pytest.fixture(scope="module", autouse=True)
def _no_downloads():
    """Every torch-hub download goes through download_url_to_file; make any attempt fail loudly.
    Module scope, so it also covers the module-scoped loader fixtures."""
    with mock.patch.object(torch.hub, "download_url_to_file", side_effect=AssertionError("tried to download")):
        yield



def _images(n=6, c=1, size=28, seed=0):
    return torch.rand(n, c, size, size, generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- pixel metrics


def test_image_mse_and_psnr_known_values():
    x_true = torch.zeros(3, 1, 28, 28)
    x_rec = torch.tensor([0.1, 0.2, 0.0]).view(3, 1, 1, 1).expand(3, 1, 28, 28)
    assert torch.allclose(metrics.image_mse(x_rec, x_true), torch.tensor([0.01, 0.04, 0.0]))
    db = metrics.psnr(x_rec, x_true)
    assert db[0].item() == pytest.approx(20.0, abs=1e-4)
    assert db[1].item() == pytest.approx(10 * math.log10(1 / 0.04), abs=1e-4)
    assert db[2].item() == metrics.PSNR_CAP_DB  # identical: capped, not inf
    assert math.isinf(metrics.psnr(x_rec, x_true, max_db=None)[2].item())


def test_psnr_clamps_to_unit_range_first():
    x_true = torch.ones(1, 3, 8, 8)
    assert metrics.psnr(x_true + 0.5, x_true).item() == metrics.PSNR_CAP_DB  # 1.5 clamps to 1.0
    assert metrics.psnr(x_true - 0.1, x_true).item() == pytest.approx(20.0, abs=1e-4)


def test_shape_mismatch_is_a_splitlab_error():
    with pytest.raises(SplitlabError, match="shapes differ"):
        metrics.image_mse(torch.zeros(2, 1, 28, 28), torch.zeros(3, 1, 28, 28))
    with pytest.raises(SplitlabError, match=r"\(N, C, H, W\)"):
        metrics.psnr(torch.zeros(2, 784), torch.zeros(2, 784))


def test_minmax_is_per_image_and_constant_images_map_to_zero():
    x = torch.stack([torch.full((1, 4, 4), 0.7), torch.linspace(0.2, 0.6, 16).view(1, 4, 4)])
    y = metrics.minmax_normalise(x)
    assert not torch.isnan(y).any()
    assert torch.equal(y[0], torch.zeros(1, 4, 4))
    assert y[1].min().item() == 0.0 and y[1].max().item() == pytest.approx(1.0)
    assert torch.allclose(y[1], (x[1] - 0.2) / 0.4, atol=1e-6)


def test_activation_mse_is_per_example_over_all_other_dims():
    h_true = torch.zeros(2, 4, 3)
    h_rec = torch.zeros(2, 4, 3)
    h_rec[1, 0, 0] = 2.0
    assert torch.allclose(metrics.activation_mse(h_rec, h_true), torch.tensor([0.0, 4.0 / 12]))


def test_ssim_identical_is_one_and_falls_with_noise():
    x = _images(4)
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    assert torch.allclose(metrics.ssim(x, x), torch.ones(4))
    light, heavy = metrics.ssim(x + 0.05 * noise, x), metrics.ssim(x + 0.3 * noise, x)
    assert light.shape == (4,) and (light < 1).all() and (heavy < light).all()
    assert torch.allclose(metrics.ssim(x, x + 0.05 * noise), light)  # symmetric


def test_ssim_matches_hand_computed_global_formula_on_a_7x7_image():
    # With a 7x7 image and skimage's 7x7 window only the centre window survives the border crop,
    # so SSIM is the global formula with sample (ddof=1) statistics.
    g = torch.Generator().manual_seed(3)
    x, y = torch.rand(1, 1, 7, 7, generator=g), torch.rand(1, 1, 7, 7, generator=g)
    a, b = x.double().flatten().numpy(), y.double().flatten().numpy()
    c1, c2 = 0.01**2, 0.03**2
    cov = np.cov(a, b, ddof=1)
    expected = ((2 * a.mean() * b.mean() + c1) * (2 * cov[0, 1] + c2)) / (
        (a.mean() ** 2 + b.mean() ** 2 + c1) * (cov[0, 0] + cov[1, 1] + c2)
    )
    assert metrics.ssim(x, y).item() == pytest.approx(expected, abs=1e-6)


def test_ssim_rgb_and_gaussian_window():
    x = _images(2, c=3, size=32)
    y = (x + 0.1 * torch.randn(x.shape, generator=torch.Generator().manual_seed(2))).clamp(0, 1)
    plain, gaussian = metrics.ssim(y, x), metrics.ssim(y, x, gaussian_weights=True)
    assert plain.shape == gaussian.shape == (2,)
    assert ((plain > 0) & (plain < 1)).all() and not torch.allclose(plain, gaussian)


def test_match_pairs_recovers_a_permutation_and_picks_the_best_subset():
    x_true = _images(8)
    order = torch.randperm(8, generator=torch.Generator().manual_seed(4))
    noise = 0.05 * torch.randn(x_true.shape, generator=torch.Generator().manual_seed(5))
    x_rec = (x_true + noise)[order]
    perm = metrics.match_pairs(x_rec, x_true)
    assert perm.dtype == torch.long
    assert torch.equal(x_rec[perm], (x_true + noise))
    decoys = torch.full((3, 1, 28, 28), 0.5)
    perm = metrics.match_pairs(torch.cat([decoys, x_rec]), x_true)
    assert torch.equal(torch.cat([decoys, x_rec])[perm], x_true + noise)
    with pytest.raises(SplitlabError, match="cost"):
        metrics.match_pairs(x_rec, x_true, cost="l1")


# --------------------------------------------------------------------------- scoring


def test_score_with_matching_equals_score_of_the_pre_permuted_batch():
    x_true = _images(6)
    x_rec = (x_true + 0.1 * torch.randn(x_true.shape, generator=torch.Generator().manual_seed(6))).clamp(0, 1)
    shuffled = x_rec[torch.tensor([3, 0, 5, 1, 4, 2])]
    matched, direct = (
        metrics.score_reconstruction(shuffled, x_true, match=True),
        metrics.score_reconstruction(x_rec, x_true),
    )
    for key in ("image_mse", "image_mse_minmax", "psnr", "psnr_max", "psnr_std", "ssim"):
        assert matched[key] == pytest.approx(direct[key], rel=1e-6), key
    assert matched["per_image"]["psnr"] == pytest.approx(direct["per_image"]["psnr"])
    assert torch.equal(shuffled[matched["perm"]], x_rec)
    unmatched = metrics.score_reconstruction(shuffled, x_true)
    assert unmatched["image_mse"] > 2 * direct["image_mse"]


def test_best_match_lets_two_targets_share_a_reconstruction_and_never_scores_below_one_to_one():
    x_true = _images(3)
    close = (x_true[0] + 0.01).clamp(0, 1)
    # two reconstructions near target 0 and one far from everything: one-to-one must give target 1 or 2
    # a poor partner, the best match gives every target its nearest reconstruction
    x_rec = torch.stack([close, close, torch.zeros_like(close)])
    score = metrics.score_reconstruction(x_rec, x_true, match=True)
    nearest = [max(float(metrics.psnr(r[None], t[None])) for r in x_rec) for t in x_true]
    assert score["per_image"]["psnr_best_match"] == pytest.approx(nearest)
    assert score["psnr_best_match"] == pytest.approx(sum(nearest) / 3)
    assert score["psnr_best_match"] > score["psnr"]
    assert all(b >= p for b, p in zip(score["per_image"]["psnr_best_match"], score["per_image"]["psnr"]))
    # a perfect batch in any order: the two rules agree (capped at 100 dB)
    perfect = metrics.score_reconstruction(x_true.flip(0), x_true, match=True)
    assert perfect["psnr_best_match"] == perfect["psnr"] == metrics.PSNR_CAP_DB
    with pytest.raises(SplitlabError, match="cannot match"):
        metrics.best_match_psnr(x_rec[:, :, :5], x_true)


def test_global_ssim_is_the_awa_papers_formula_over_the_whole_image():
    x_true = _images(3)
    noisy = (x_true + 0.2 * torch.randn(x_true.shape, generator=torch.Generator().manual_seed(1))).clamp(0, 1)
    a, b = noisy.flatten(1).double(), x_true.flatten(1).double()
    c1, c2 = 0.01 ** 2, 0.03 ** 2
    cov = ((a - a.mean(1, keepdim=True)) * (b - b.mean(1, keepdim=True))).mean(1)
    by_hand = ((2 * a.mean(1) * b.mean(1) + c1) * (2 * cov + c2)
               / ((a.mean(1) ** 2 + b.mean(1) ** 2 + c1) * (a.var(1, unbiased=False) + b.var(1, unbiased=False) + c2)))
    assert metrics.ssim_global(noisy, x_true).tolist() == pytest.approx(by_hand.tolist(), rel=1e-6)
    assert metrics.ssim_global(x_true, x_true).tolist() == pytest.approx([1.0] * 3)
    assert float(metrics.ssim_global(1 - x_true, x_true).max()) < 0            # anti-correlated
    score = metrics.score_reconstruction(noisy, x_true)
    assert score["ssim_global"] == pytest.approx(float(by_hand.mean()), rel=1e-6)
    assert score["ssim_global"] != pytest.approx(score["ssim"], abs=1e-3)       # not the windowed SSIM


def test_score_keys_clamping_minmax_and_unavailable_reasons():
    x_true = _images(3)
    x_true = metrics.minmax_normalise(x_true)  # each target spans exactly [0,1]
    score = metrics.score_reconstruction(0.5 * x_true + 2.0, x_true, lpips=metrics.Unavailable("no weights"))
    # the clamped reconstruction is all ones; min-max of the raw one gives back the target exactly
    assert score["image_mse"] == pytest.approx(float(((1 - x_true) ** 2).mean()), rel=1e-5)
    assert score["image_mse_minmax"] == pytest.approx(0.0, abs=1e-10)
    assert score["psnr_max"] >= score["psnr"] and score["psnr_std"] >= 0
    assert score["lpips"] is None and score["fid"] is None
    assert score["unavailable"] == {"lpips": "no weights", "fid": "not requested"}
    assert set(score["per_image"]) >= {"image_mse", "image_mse_minmax", "psnr", "ssim"}
    assert all(type(v) is float for v in score["per_image"]["psnr"])
    assert type(score["ssim"]) is float and len(score["per_image"]["ssim"]) == 3


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_score_on_cuda_tensors_matches_cpu():
    x_true = _images(4)
    x_rec = (x_true + 0.1 * torch.randn(x_true.shape, generator=torch.Generator().manual_seed(7)))[[2, 0, 3, 1]]
    on_cpu = metrics.score_reconstruction(x_rec, x_true, match=True)
    on_gpu = metrics.score_reconstruction(x_rec.cuda(), x_true.cuda(), match=True)
    assert on_gpu["perm"] == on_cpu["perm"]
    for key in ("image_mse", "image_mse_minmax", "psnr", "ssim"):
        assert on_gpu[key] == pytest.approx(on_cpu[key], rel=1e-5), key


def test_score_refuses_targets_outside_unit_range():
    x = _images(2)
    with pytest.raises(SplitlabError, match=r"\[0,1\]"):
        metrics.score_reconstruction(x, 2 * x - 1)


def _restarts(n=3, trials=2, size=8, seed=11):
    """A well-formed restart attack's result: `trials` guesses of a batch of n grayscale images, with labels."""
    g = torch.Generator().manual_seed(seed)
    return Reconstruction(attack="dlg", preset="dlg.quick", trials=torch.rand(trials, n, 1, size, size, generator=g),
                          loss=torch.arange(trials, dtype=torch.float32), history={},
                          diverged=torch.zeros(trials, dtype=torch.bool), seconds=1.0, steps=5,
                          labels=torch.zeros(trials, n, dtype=torch.long), label_rule="idlg")


def _score_error(*args, **kwargs) -> str:
    with pytest.raises(SplitlabError) as caught:
        metrics.score(*args, **kwargs)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_score_through_the_python_api_names_the_reconstruction_it_expects():
    from splitlab import api

    images = _images(3, size=8)
    with pytest.raises(SplitlabError, match=r"attacks\.result\.Reconstruction .*got a str$"):
        api.score("not a reconstruction", images)
    assert api.score(_restarts(), images, torch.tensor([0, 0, 1]))["label_accuracy"] == pytest.approx(2 / 3)


@pytest.mark.parametrize("images", [
    torch.rand(3, 8, 8),                 # no channel axis
    torch.rand(1, 3, 1, 8, 8),           # an extra axis
    torch.rand(0, 1, 8, 8),              # no image at all
    [[0.5] * 8] * 8,                     # not a tensor
], ids=["rank-3", "rank-5", "empty", "list"])
def test_score_refuses_target_images_that_are_not_an_nchw_batch(images):
    message = _score_error(_restarts(), images)
    assert "the target images must be a tensor shaped (N, C, H, W)" in message and "[0, 1]" in message


def test_score_refuses_target_images_of_another_shape_than_the_reconstruction():
    message = _score_error(_restarts(n=3), _images(4, size=8))
    assert "(3, 1, 8, 8)" in message and "(4, 1, 8, 8)" in message
    message = _score_error(_restarts(n=3, size=8), _images(3, size=10))
    assert "(3, 1, 8, 8)" in message and "(3, 1, 10, 10)" in message


@pytest.mark.parametrize("labels", [
    torch.tensor([0, 1]),                # one label short
    torch.tensor([[0], [1], [2]]),       # one per image, but 2-D
    torch.tensor([0.0, 1.0, 2.0]),       # floats, not class indices
    [0, 1, 2],                           # not a tensor
], ids=["too-few", "rank-2", "float", "list"])
def test_score_refuses_labels_that_are_not_one_integer_per_target_image(labels):
    assert "labels must be an integer tensor shaped (N,) = (3,)" in _score_error(_restarts(n=3), _images(3, size=8),
                                                                                 labels)


def test_score_refuses_targets_outside_unit_range_or_nan():
    images = _images(3, size=8)
    assert "[0,1]" in _score_error(_restarts(), 2 * images - 1)
    images[1, 0, 2, 2] = float("nan")
    assert "[0,1]" in _score_error(_restarts(), images)


def test_score_refuses_a_reconstruction_whose_fields_disagree():
    good = _restarts(n=3, trials=2)
    images = _images(3, size=8)
    bad_loss = Reconstruction(**{**vars(good), "loss": torch.zeros(3)})
    assert "loss must be a tensor shaped (T,) = (2,)" in _score_error(bad_loss, images)
    bad_labels = Reconstruction(**{**vars(good), "labels": torch.zeros(2, 4, dtype=torch.long)})
    assert "labels must be a tensor shaped (T, B) = (2, 3)" in _score_error(bad_labels, images)
    flat_trials = Reconstruction(**{**vars(good), "trials": good.trials.flatten(2)})
    assert "trials must be a tensor shaped (T, B, C, H, W)" in _score_error(flat_trials, images)


def test_score_refuses_a_perceptual_metric_that_was_not_loaded():
    assert "load_lpips()" in _score_error(_restarts(), _images(3, size=8), lpips="alex")
    assert "load_fid()" in _score_error(_restarts(), _images(3, size=8), fid=object())


def test_score_reconstruction_refuses_a_reconstruction_that_is_not_images():
    with pytest.raises(SplitlabError, match=r"the reconstruction must be a tensor shaped \(N, C, H, W\)"):
        metrics.score_reconstruction(np.zeros((3, 1, 8, 8)), _images(3, size=8))


# --------------------------------------------------------------------------- LPIPS


@pytest.fixture(scope="module")
def alexnet_file(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("weights") / "alexnet-owt-7be5be79.pth"
    torch.save(torchvision.models.alexnet(weights=None).state_dict(), path)
    return path


@pytest.fixture(scope="module")
def lpips_metric(alexnet_file):
    return metrics.load_lpips("alex", backbone_weights=alexnet_file)


def test_lpips_loads_the_given_backbone_and_scores(lpips_metric, alexnet_file, one_thread):
    assert isinstance(lpips_metric, metrics.LpipsMetric)
    saved = torch.load(alexnet_file, weights_only=True, mmap=True)
    loaded = lpips_metric.model.net.state_dict()
    assert torch.equal(loaded["slice1.0.weight"], saved["features.0.weight"])
    assert torch.equal(loaded["slice5.10.bias"], saved["features.10.bias"])
    x = _images(3)  # 28x28 grayscale: upsampled and repeated to RGB inside
    same = lpips_metric(x, x)
    other = lpips_metric(x, _images(3, seed=9))
    assert same.shape == other.shape == (3,)
    assert torch.allclose(same, torch.zeros(3), atol=1e-6) and (other > 0).all()
    score = metrics.score_reconstruction(x, x, lpips=lpips_metric)
    assert score["lpips"] == pytest.approx(0.0, abs=1e-6) and "lpips" not in score["unavailable"]


def test_lpips_reads_the_hub_cache(tmp_path, alexnet_file):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / alexnet_file.name).symlink_to(alexnet_file)
    assert isinstance(metrics.load_lpips(hub_dir=tmp_path), metrics.LpipsMetric)


def test_lpips_unavailable_names_the_missing_file(tmp_path):
    result = metrics.load_lpips(hub_dir=tmp_path)
    assert isinstance(result, metrics.Unavailable)
    assert str(tmp_path / "checkpoints" / "alexnet-owt-7be5be79.pth") in result.reason
    assert "--lpips-weights" in result.reason and "\n" not in result.reason
    assert "`splitlab weights --download alex`" in result.reason
    vgg = metrics.load_lpips("vgg", hub_dir=tmp_path).reason
    assert "vgg16-397923af.pth" in vgg and "`splitlab weights --download vgg`" in vgg
    with pytest.raises(SplitlabError, match="alexnet-owt-7be5be79.pth"):
        metrics.load_lpips(hub_dir=tmp_path, require=True)
    with pytest.raises(SplitlabError, match="unknown LPIPS net"):
        metrics.load_lpips("resnet", hub_dir=tmp_path)


def test_lpips_rejects_a_file_that_is_not_alexnet(tmp_path):
    wrong = tmp_path / "wrong.pth"
    torch.save({"features.0.weight": torch.zeros(3, 3)}, wrong)
    result = metrics.load_lpips(backbone_weights=wrong)
    assert isinstance(result, metrics.Unavailable) and "features.0.weight" in result.reason
    (tmp_path / "garbage.pth").write_bytes(b"not a checkpoint")
    assert "cannot read" in metrics.load_lpips(backbone_weights=tmp_path / "garbage.pth").reason


# --------------------------------------------------------------------------- FID


@pytest.fixture(scope="module")
def inception_file(tmp_path_factory):
    """A randomly initialised FID Inception state dict, built by pytorch-fid itself with loading patched out."""
    captured = []

    def capture(module, state_dict, *args, **kwargs):
        for layer in module.modules():  # He init keeps random features from vanishing through 90 layers
            if isinstance(layer, torch.nn.Conv2d):
                torch.nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
        captured.append(module.state_dict())

    torch.manual_seed(0)
    with mock.patch.object(fid_inception, "load_state_dict_from_url", return_value={}), mock.patch.object(
        torchvision.models.inception.Inception3, "load_state_dict", capture
    ):
        fid_inception.fid_inception_v3()
    path = tmp_path_factory.mktemp("weights") / metrics.FID_WEIGHTS_FILE
    torch.save(captured[0], path)
    return path


@pytest.fixture(scope="module")
def fid_metric(inception_file):
    return metrics.load_fid(weights=inception_file)


def test_fid_builds_without_pytorch_fids_downloading_constructor_or_loader(inception_file):
    # fid_inception_v3 always ends in load_state_dict_from_url (a download when the hub cache lacks the file)
    refuse = AssertionError("pytorch-fid's downloading path was taken")
    with mock.patch.object(fid_inception, "fid_inception_v3", side_effect=refuse), \
            mock.patch.object(fid_inception, "load_state_dict_from_url", side_effect=refuse):
        assert isinstance(metrics.load_fid(weights=inception_file), metrics.FidMetric)


def test_fid_features_are_bitwise_those_of_pytorch_fids_own_inception(fid_metric, inception_file, one_thread):
    state = torch.load(inception_file, map_location="cpu", weights_only=True)
    with mock.patch.object(fid_inception, "load_state_dict_from_url", return_value=state):
        reference = fid_inception.InceptionV3([fid_inception.InceptionV3.BLOCK_INDEX_BY_DIM[2048]]).eval()
    x = _images(2, c=3, size=16)
    with torch.no_grad():
        expected = reference(x)[0].flatten(1).double().numpy()
    assert np.array_equal(fid_metric.features(x), expected)


def test_fid_is_zero_for_the_same_set_and_positive_otherwise(fid_metric, one_thread):
    a, b = _images(4, seed=0), 0.5 * _images(4, seed=1)
    fa, fb = fid_metric.features(a), fid_metric.features(b)
    assert fa.shape == (4, 2048)
    same, other = metrics.frechet_distance(fa, fa), metrics.frechet_distance(fa, fb)
    assert other > 0 and same <= 1e-9 * other


def test_fid_reads_the_hub_cache_and_score_reports_it(tmp_path, inception_file, fid_metric, one_thread):
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / metrics.FID_WEIGHTS_FILE).symlink_to(inception_file)
    assert isinstance(metrics.load_fid(hub_dir=tmp_path), metrics.FidMetric)
    x = _images(3, c=3, size=16)
    assert metrics.score_reconstruction(x, x, fid=fid_metric)["fid"] == pytest.approx(0.0, abs=1e-9)
    single = metrics.score_reconstruction(x[:1], x[:1], fid=fid_metric)
    assert single["fid"] is None and "at least 2" in single["unavailable"]["fid"]


def test_fid_unavailable_names_the_missing_file(tmp_path):
    result = metrics.load_fid(hub_dir=tmp_path)
    assert isinstance(result, metrics.Unavailable)
    assert str(tmp_path / "checkpoints" / metrics.FID_WEIGHTS_FILE) in result.reason
    assert "--fid-weights" in result.reason and "`splitlab weights --download fid`" in result.reason
    assert "\n" not in result.reason
    with pytest.raises(SplitlabError, match=metrics.FID_WEIGHTS_FILE):
        metrics.load_fid(hub_dir=tmp_path, require=True)
    wrong = tmp_path / "wrong.pth"
    torch.save({"fc.weight": torch.zeros(2, 2)}, wrong)
    assert "does not fit" in metrics.load_fid(weights=wrong).reason


@pytest.mark.parametrize("n", [10, 60])  # fewer and more samples than dimensions
def test_frechet_distance_equals_pytorch_fid_reference(n):
    rng = np.random.default_rng(n)
    a, b = np.abs(rng.normal(size=(n, 32))), np.abs(rng.normal(size=(n, 32))) + 0.2 * rng.normal(size=32)

    def stats(x):
        return x.mean(axis=0), np.cov(x, rowvar=False)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # pytorch-fid passes scipy's deprecated `disp`
        reference = calculate_frechet_distance(*stats(a), *stats(b))
    assert metrics.frechet_distance(a, b) == pytest.approx(reference, rel=1e-6)
