"Packaging for posenc_nb: everything is read from settings.ini, the one place requirements are declared."
from configparser import ConfigParser
import setuptools

cfg = ConfigParser(delimiters=['='])
cfg.read('settings.ini', encoding='utf-8')
cfg = cfg['DEFAULT']

requirements = cfg.get('requirements', '').split()
dev_requirements = cfg.get('dev_requirements', '').split()
tensorboard_requirements = cfg.get('tensorboard_requirements', '').split()
interp_requirements = cfg.get('interp_requirements', '').split()
docs_requirements = cfg.get('docs_requirements', '').split()
console_scripts = cfg.get('console_scripts', '').split()

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=open('README.md', encoding='utf-8').read(),
    long_description_content_type='text/markdown',
    author=cfg['author'],
    author_email=cfg['author_email'],
    license='Apache-2.0',
    python_requires=f">={cfg['min_python']}",
    packages=setuptools.find_packages(include=[cfg['lib_path'], cfg['lib_path'] + '.*']),
    include_package_data=True,
    install_requires=requirements,
    extras_require={'dev': dev_requirements, 'tensorboard': tensorboard_requirements,
                    'interp': interp_requirements, 'docs': docs_requirements},
    entry_points={'console_scripts': console_scripts, 'nbdev': [f"{cfg['lib_path']}={cfg['lib_path']}._modidx:d"]},
    zip_safe=False,
)
