"""The 14 hand-written Spanish film reviews of Navarro Castillo, *Técnicas de ML para PLN*
(Oviedo, 2022, ch. 3).

That work classifies them as ``positiva`` / ``negativa`` with CountVectorizer (Spanish stop
words) → TfidfTransformer → ``train_test_split(test_size=0.25, random_state=0)`` →
MultinomialNB (confusion matrix [[2, 0], [1, 1]], 75 %) and ``SVC(kernel='linear')``
([[0, 2], [0, 2]], 50 %). :data:`REVIEWS` lists them in the work's order with its labels;
:func:`load_reviews` gives the work's split: 10 training and 4 test reviews (``validation``
repeats the training reviews: the work has none).

Label ids follow scikit-learn's sorted order of the work's string labels, so confusion
matrices read the same as the published ones (row/column 0 = ``negativa``, 1 = ``positiva``).

The work builds "a list of the most common Spanish stop words" (``stopwordlist``) but does
not print it. hfattn uses :data:`STOP_WORDS_ES`, the Snowball project's Spanish stop-word list
(BSD-3-Clause; the same 313 words NLTK ships as ``stopwords.words("spanish")`` and PostgreSQL
as ``tsearch_data/spanish.stop``; its typos ``vosostros`` / ``vosostras`` are kept as
published). The published matrices depend on its unknown list, so results with this one differ
(see the table of ``docs/tasks/baselines.md``).
"""

from __future__ import annotations

from .classification import ClassificationData

REVIEWS: tuple[tuple[str, str], ...] = (
    ("Me gustó la peli", "positiva"),
    ("Es una buena película. Buena historia", "positiva"),
    (
        "La actuación del héroe es mala pero la heroína era guapa. En general, buena película",
        "positiva",
    ),
    ("Buenas canciones. Pero final realmente aburrido.", "negativa"),
    ("Peli triste y aburrida", "negativa"),
    ("Es la peor película que he visto en mucho tiempo", "negativa"),
    ("En general divertida, pero un poco rara", "positiva"),
    ("Al principio prometía, pero después resultó ser aburrida", "negativa"),
    ("Una película llena de acción y final feliz", "positiva"),
    ("Me sorprendió gratamente por su historia increíble", "positiva"),
    ("Demasiado lenta y aburrida, además el argumento es bastante pobre", "negativa"),
    ("Cuando empezó parecía guay, pero pronto resultó ser muy mala", "negativa"),
    ("Los actores no sabían actuar y el argumento era malísimo", "negativa"),
    ("El actor principal muy guapo. Entretenida de inicio a fin", "positiva"),
)
"""(text, label) of the work's ``dataset`` list, in its order (index = the work's row)."""

LABEL_NAMES = ["negativa", "positiva"]
"""Class names by label id (scikit-learn's sorted order of the work's labels)."""

DATA_LICENSES = {"reviews-es": None}
"""Unknown: the work states no licence for its reviews, so a model trained on them needs
``hub.license`` in its recipe to be published (see :mod:`hfattn.data.licenses`)."""

TEST_SIZE = 0.25
RANDOM_STATE = 0
"""The work's ``train_test_split`` arguments: ceil(0.25 · 14) = 4 test reviews."""

STOP_WORDS_ES: tuple[str, ...] = tuple(
    """
    de la que el en y a los del se las por un para con no una su al lo como más pero sus le
    ya o este sí porque esta entre cuando muy sin sobre también me hasta hay donde quien
    desde todo nos durante todos uno les ni contra otros ese eso ante ellos e esto mí antes
    algunos qué unos yo otro otras otra él tanto esa estos mucho quienes nada muchos cual
    poco ella estar estas algunas algo nosotros mi mis tú te ti tu tus ellas nosotras
    vosostros vosostras os mío mía míos mías tuyo tuya tuyos tuyas suyo suya suyos suyas
    nuestro nuestra nuestros nuestras vuestro vuestra vuestros vuestras esos esas estoy
    estás está estamos estáis están esté estés estemos estéis estén estaré estarás estará
    estaremos estaréis estarán estaría estarías estaríamos estaríais estarían estaba estabas
    estábamos estabais estaban estuve estuviste estuvo estuvimos estuvisteis estuvieron
    estuviera estuvieras estuviéramos estuvierais estuvieran estuviese estuvieses
    estuviésemos estuvieseis estuviesen estando estado estada estados estadas estad he has
    ha hemos habéis han haya hayas hayamos hayáis hayan habré habrás habrá habremos habréis
    habrán habría habrías habríamos habríais habrían había habías habíamos habíais habían
    hube hubiste hubo hubimos hubisteis hubieron hubiera hubieras hubiéramos hubierais
    hubieran hubiese hubieses hubiésemos hubieseis hubiesen habiendo habido habida habidos
    habidas soy eres es somos sois son sea seas seamos seáis sean seré serás será seremos
    seréis serán sería serías seríamos seríais serían era eras éramos erais eran fui fuiste
    fue fuimos fuisteis fueron fuera fueras fuéramos fuerais fueran fuese fueses fuésemos
    fueseis fuesen sintiendo sentido sentida sentidos sentidas siente sentid tengo tienes
    tiene tenemos tenéis tienen tenga tengas tengamos tengáis tengan tendré tendrás tendrá
    tendremos tendréis tendrán tendría tendrías tendríamos tendríais tendrían tenía tenías
    teníamos teníais tenían tuve tuviste tuvo tuvimos tuvisteis tuvieron tuviera tuvieras
    tuviéramos tuvierais tuvieran tuviese tuvieses tuviésemos tuvieseis tuviesen teniendo
    tenido tenida tenidos tenidas tened
    """.split()
)
"""The Snowball Spanish stop-word list (313 words; see the module docstring)."""


def thesis_split() -> tuple[list[int], list[int]]:
    """Row indices of :data:`REVIEWS` in the work's train and test sets, in the order
    ``train_test_split(..., test_size=0.25, random_state=0)`` returns them (the split depends
    only on the number of rows and ``random_state``, not on their contents)."""
    from sklearn.model_selection import train_test_split

    train, test = train_test_split(
        list(range(len(REVIEWS))), test_size=TEST_SIZE, random_state=RANDOM_STATE
    )
    return list(train), list(test)


def load_reviews(seed: int):
    """The ``reviews-es`` classification task: ``train`` (10 reviews) and ``test`` (4), the
    work's split; ``seed`` is accepted for the loader interface and ignored (the split is the
    work's fixed ``random_state=0``).

    The work has no validation split and 14 reviews leave none to spare, so ``validation``
    repeats the 10 training reviews: the 4 test reviews stay unseen by any model selection
    (a validation score here is a training score).

    Returns:
        :class:`hfattn.data.classification.ClassificationData` (labels :data:`LABEL_NAMES`).
    """

    del seed
    train, test = (
        ([REVIEWS[i][0] for i in rows], [LABEL_NAMES.index(REVIEWS[i][1]) for i in rows])
        for rows in thesis_split()
    )
    return ClassificationData.from_lists(
        {"train": train, "validation": train, "test": test}, LABEL_NAMES
    )


__all__ = [
    "DATA_LICENSES",
    "LABEL_NAMES",
    "RANDOM_STATE",
    "REVIEWS",
    "STOP_WORDS_ES",
    "TEST_SIZE",
    "load_reviews",
    "thesis_split",
]
