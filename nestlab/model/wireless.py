"""The keys of a wireless medium (``kind: wireless``) and of the stations on it (docs/wireless.md).

A medium::

    air: {kind: wireless, standard: 802.11g, channel: 6, noise_floor: -91,
          propagation: {model: log-distance, exponent: 3}}

A station (any node with a link to the medium, ``["a:wlan0", "air:a"]``)::

    a: {position: [0, 0, 1.5], tx_power: 20, antenna_gain: 0}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

STANDARDS = ("802.11a", "802.11b", "802.11g", "802.11n", "802.11ac")
MODELS = ("friis", "log-distance", "log-normal", "two-ray", "itu-indoor")
RATE_CONTROLS = ("ideal", "minstrel")
FADINGS = ("none", "rayleigh", "rician", "nakagami")
FIVE_GHZ = ("802.11a", "802.11ac")  # the standards that exist only on 5 GHz channels
WIDTHS = {"802.11n": (20, 40), "802.11ac": (20, 40, 80, 160)}  # the channel widths (MHz) HT and VHT allow
DEFAULT_CHANNEL = {"802.11a": 36, "802.11ac": 36}  # others: channel 1 (2.412 GHz)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Propagation(_Strict):
    """How signal falls with distance (each model's parameters; the others are ignored)."""

    model: Literal["friis", "log-distance", "log-normal", "two-ray", "itu-indoor"] = Field(
        default="log-distance", description=f"one of {', '.join(MODELS)}"
    )
    exponent: float = Field(default=3.0, gt=0, le=10, description="log-distance, log-normal: path-loss exponent (2 = free space)")
    reference: float = Field(default=1.0, gt=0, description="log-distance, log-normal: reference distance d0 in metres")
    sigma: float = Field(default=4.0, ge=0, le=30, description="log-normal: shadowing deviation in dB (per pair)")
    decorrelation: float = Field(
        default=10.0,
        gt=0,
        le=10_000,
        description="log-normal: metres a station moves for its shadowing's correlation to fall to 1/e",
    )
    system_loss: float = Field(default=0.0, ge=0, le=50, description="every model: extra loss in dB (cables, body)")
    height: float = Field(default=1.0, gt=0, description="two-ray: antenna height in metres of a station placed at z = 0")
    power_coefficient: float = Field(default=30.0, gt=0, description="itu-indoor: N, the distance power loss coefficient")
    floors: int = Field(default=0, ge=0, le=50, description="itu-indoor: floors between every two stations")
    floor_loss: float = Field(default=15.0, ge=0, description="itu-indoor: dB lost at the first floor crossed (4 more each next)")
    seed: int = Field(default=1, description="log-normal: seed of the per-pair shadowing")


class Fading(_Strict):
    """Fast fading: each frame's power on each link times a random gain of mean 1 (docs/wireless.md)."""

    model: Literal["none", "rayleigh", "rician", "nakagami"] = Field(default="none", description=f"one of {', '.join(FADINGS)}")
    k: float = Field(
        default=6.0, ge=0, le=1000, description="rician: K factor, the direct path's power over the scattered (linear)"
    )
    m: float = Field(default=2.0, ge=0.5, le=100, description="nakagami: shape m (1: Rayleigh; larger: milder)")
    seed: int = Field(default=1, description="seed of the per-frame draws")


def _fading(value: Any) -> Any:
    return {"model": value} if isinstance(value, str) else value  # `fading: rayleigh` is {model: rayleigh}


def _position(value: list[float]) -> list[float]:
    if len(value) not in (2, 3):
        raise ValueError(f"a position is [x, y] or [x, y, z] in metres, not {len(value)} numbers")
    return [float(v) for v in value] + [0.0] * (3 - len(value))


class Mobility(_Strict):
    """How stations move, played by ``nestlab run`` (docs/wireless.md)."""

    model: Literal["random-waypoint", "random-walk", "gauss-markov", "trace"] = Field(description="how the stations move")
    area: list[float] = Field(default_factory=lambda: [100.0, 100.0], description="[width, height] in metres: where they move")
    speed: list[float] = Field(default_factory=lambda: [1.0, 5.0], description="[min, max] in m/s")
    pause: float = Field(default=0.0, ge=0, description="random-waypoint: seconds still at each waypoint")
    interval: float = Field(default=0.1, gt=0, le=60, description="seconds between position updates (0.1: 10 Hz)")
    alpha: float = Field(default=0.75, ge=0, le=1, description="gauss-markov: memory (0: random walk, 1: straight line)")
    duration: float = Field(default=60.0, gt=0, description="seconds of movement")
    stations: list[str] | None = Field(default=None, description="the stations that move (default: all on the medium)")
    trace: str | None = Field(
        default=None, description="trace: a file of steps {t, positions: {node: [x, y]}} (nestlab mobility writes them)"
    )
    seed: int = Field(default=1)

    @field_validator("area", "speed")
    @classmethod
    def _pair(cls, value: list[float]) -> list[float]:
        if len(value) != 2 or min(value) < 0:
            raise ValueError("give two non-negative numbers, e.g. [100, 100]")
        return value

    @model_validator(mode="after")
    def _trace_file(self) -> Mobility:
        if (self.model == "trace") != (self.trace is not None):
            raise ValueError("model: trace needs trace: FILE, and trace: FILE needs model: trace")
        return self


def channel_problem(standard: str, channel: int) -> str | None:
    """Why ``channel`` is not one of ``standard``'s (None: it is)."""
    if standard in FIVE_GHZ or (standard == "802.11n" and channel > 14):
        return None if 32 <= channel <= 177 else f"{standard} uses 5 GHz channels 32-177, not {channel}"
    return None if 1 <= channel <= 14 else f"{standard} uses 2.4 GHz channels 1-14, not {channel}"


def phy_problem(standard: str, width: int | None, streams: int | None, short_gi: bool | None) -> tuple[str, str] | None:
    """(key, why) when ``width``, ``streams`` or ``short_gi`` is not the standard's (only HT and VHT have them)."""
    widths = WIDTHS.get(standard, ())
    for key, value in (("width", width), ("streams", streams), ("short_gi", short_gi)):
        if value is not None and not widths:
            return key, f"{key} is 802.11n's and 802.11ac's, not {standard}'s"
    if width is not None and width not in widths:
        return "width", f"{standard} has {', '.join(map(str, widths))} MHz channels, not {width}"
    return None


def frequency(standard: str, channel: int | None) -> float:
    """The channel's centre frequency in Hz."""
    channel = channel or DEFAULT_CHANNEL.get(standard, 1)
    if channel == 14:
        return 2.484e9
    return (2407 + 5 * channel) * 1e6 if channel <= 14 else (5000 + 5 * channel) * 1e6


# [x, y] or [x, y, z] in metres, read as [x, y, z] (z = 0 when left out).
Position = Annotated[list[float], AfterValidator(_position)]
Standard = Literal["802.11a", "802.11b", "802.11g", "802.11n", "802.11ac"]
RateControl = Literal["ideal", "minstrel"]
FadingKey = Annotated[Fading, BeforeValidator(_fading)]

# The medium's keys (kind: wireless), read by nestlab/kinds/wireless.py.
MEDIUM_KEYS: dict[str, tuple[Any, dict[str, Any]]] = {
    "standard": (Standard | None, {"default": None, "description": "wireless: 802.11a/b/g/n/ac (its rates by signal)"}),
    "channel": (int | None, {"default": None, "description": "wireless: channel number (default 1, or 36 on 5 GHz)"}),
    "propagation": (Propagation | None, {"default": None, "description": "wireless: the path-loss model and its parameters"}),
    "noise_floor": (
        float | None,
        {
            "default": None,
            "ge": -130,
            "le": -40,
            "description": "wireless: noise floor in dBm (default -91: 20 MHz, 10 dB noise figure)",
        },
    ),
    "rate_control": (
        RateControl | None,
        {"default": None, "description": "wireless: how a station picks each attempt's rate: ideal (by mean signal) or minstrel"},
    ),
    "fading": (
        FadingKey | None,
        {
            "default": None,
            "description": "wireless: fast fading per frame: none, rayleigh, rician or nakagami (or {model: ..., k, m, seed})",
        },
    ),
    "mobility": (Mobility | None, {"default": None, "description": "wireless: how its stations move, played by nestlab run"}),
    "width": (
        Literal[20, 40, 80, 160] | None,
        {"default": None, "description": "wireless: 802.11n/ac channel width in MHz (default 20 for n, 80 for ac)"},
    ),
    "streams": (
        int | None,
        {"default": None, "ge": 1, "le": 4, "description": "wireless: 802.11n/ac spatial streams (default 1)"},
    ),
    "short_gi": (
        bool | None,
        {"default": None, "description": "wireless: 802.11n/ac short guard interval (3.6 µs symbols; default off)"},
    ),
}


# A station's keys (any node linked to a medium), read by nestlab/kinds/wireless.py.
STATION_KEYS: dict[str, tuple[Any, dict[str, Any]]] = {
    "position": (
        Position | None,
        {"default": None, "description": "a wireless station's place: [x, y] or [x, y, z] in metres"},
    ),
    "tx_power": (
        float | None,
        {"default": None, "ge": -10, "le": 40, "description": "a wireless station's transmit power in dBm (default 20)"},
    ),
    "antenna_gain": (
        float | None,
        {"default": None, "ge": -20, "le": 30, "description": "a wireless station's antenna gain in dBi (default 0)"},
    ),
}
